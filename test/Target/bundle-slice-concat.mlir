// Slices, their gradients and concats become kernels of their own whose
// memrefs are windows of the iteration space (KernelWindow): a slice reads
// its input at offsets and steps, a slice's gradient writes dy into a window
// of its output (0 elsewhere), a concat copies each input to its part along
// the axis. The space merges the dimensions that every memref covers whole
// (batch and positions of a feature slice: [8, 4]); each kernel lists the
// memrefs' own extents (-1: the space's size) for the runtime.
// RUN: gpipe-opt %S/../Dialect/GPipe/Transforms/gpipe-differentiate-slice-concat.mlir -gpipe-compile="num-stages=1 num-microbatches=2" | gpipe-translate --gpipe-to-bundle | FileCheck %s
// RUN: gpipe-opt %S/../Dialect/GPipe/Transforms/gpipe-differentiate-slice-concat.mlir -gpipe-compile="num-stages=1 num-microbatches=2" | gpipe-translate --gpipe-to-bundle | FileCheck %s --check-prefix=OP

// CHECK: "kernels": [
// CHECK: "ops": "rank 2: in0(0,1)[offsets=0,0 steps=1,1 extents=-1,8] -> out(0,1); slice(in0)->out",
// CHECK: "ops": "rank 2: in0(0,1)[offsets=0,4 steps=1,1 extents=-1,8] -> out(0,1); slice(in0)->out",
// CHECK: "extents": [
// CHECK-NEXT: [
// CHECK-NEXT: -1,
// CHECK-NEXT: 4
// CHECK-NEXT: ],
// CHECK-NEXT: [
// CHECK-NEXT: -1,
// CHECK-NEXT: 4
// CHECK-NEXT: ],
// CHECK-NEXT: [
// CHECK-NEXT: -1,
// CHECK-NEXT: -1
// CHECK-NEXT: ]
// CHECK-NEXT: ],
// CHECK: "ops": "rank 2: in0(0,1)[offsets=0,0 steps=1,1 extents=-1,4] in1(0,1)[offsets=0,0 steps=1,1 extents=-1,4] -> out(0,1); concat[axis=1](in0,in1)->out",
// CHECK: "ops": "rank 3: in0(0,1,2)[offsets=0,1,0 steps=1,2,3 extents=-1,4,8] -> out(0,1,2); slice(in0)->out",
// CHECK: "ops": "rank 3: in0(0,1,2) -> out(0,1,2)[offsets=0,1,0 steps=1,2,3 extents=-1,4,8]; slice(in0)->out",
// CHECK: "ops": "rank 2: in0(0,1) -> out(0,1)[offsets=0,4 steps=1,1 extents=-1,8]; slice(in0)->out",

// The feature slices run over batch x positions (8 rows at the full batch)
// and the features; the strided slice keeps the batch apart.
// OP: "forward": [
// OP: "kernel": 1,
// OP: "space": [
// OP-NEXT: 8,
// OP-NEXT: 4
// OP-NEXT: ]
// OP: "kernel": 5,
// OP: "space": [
// OP-NEXT: 2,
// OP-NEXT: 2,
// OP-NEXT: 3
// OP-NEXT: ]
