// Gathers and their gradients become kernels of their own. The space is the
// gathered shape (a gradient's: dy's); the table (a gather's input, a
// gradient's output) has every dimension, with its own extent along the
// axis; the i32 indices only the axis (and the batch when batched). The
// gradient writes its output whole. Dimensions every memref has or lacks
// alike merge; a gather along axis 0 of a parameter runs over a unit
// dimension in front (the first is the one a batch scales), so that it
// shares the kernel of the per-example gather along axis 1.
// RUN: gpipe-opt %S/../Dialect/GPipe/Transforms/gpipe-differentiate-gather.mlir -gpipe-compile="num-stages=1 num-microbatches=2" | gpipe-translate --gpipe-to-bundle | FileCheck %s
// RUN: gpipe-opt %S/../Dialect/GPipe/Transforms/gpipe-differentiate-gather.mlir -gpipe-compile="num-stages=1 num-microbatches=2" | gpipe-translate --gpipe-to-bundle | FileCheck %s --check-prefix=OP

// CHECK: "kernels": [
// CHECK: "extents": [
// CHECK-NEXT: [
// CHECK-NEXT: -1,
// CHECK-NEXT: 4,
// CHECK-NEXT: -1
// CHECK-NEXT: ],
// CHECK-NEXT: [
// CHECK-NEXT: -1
// CHECK-NEXT: ],
// CHECK: "ops": "rank 3: in0(0,1,2)[offsets=0,0,0 steps=1,1,1 extents=-1,4,-1] in1(1):i32 -> out(0,1,2); gather[axis=1](in0,in1)->out",
// CHECK: "types": [
// CHECK-NEXT: "f32",
// CHECK-NEXT: "i32",
// CHECK-NEXT: "f32"
// CHECK-NEXT: ]
// CHECK: "ops": "rank 3: in0(0,1,2)[offsets=0,0,0 steps=1,1,1 extents=-1,-1,8] in1(0,2):i32 -> out(0,1,2); gather[axis=2](in0,in1)->out",
// CHECK: "ops": "rank 3: in0(0,1,2) in1(0,2):i32 -> out(0,1,2)[offsets=0,0,0 steps=1,1,1 extents=-1,-1,8]; gather_grad[axis=2](in0,in1)->out",
// CHECK: "ops": "rank 3: in0(0,1,2) in1(1):i32 -> out(0,1,2)[offsets=0,0,0 steps=1,1,1 extents=-1,4,-1]; gather_grad[axis=1](in0,in1)->out",

// The parameter's gather runs over [1, 3, 8], the per-example one over the
// micro-batch's rows.
// OP: "forward": [
// OP: "kernel": 2,
// OP: "space": [
// OP-NEXT: 2,
// OP-NEXT: 3,
// OP-NEXT: 8
// OP-NEXT: ]
// OP: "batched": false,
// OP-NEXT: "kernel": 2,
// OP: "space": [
// OP-NEXT: 1,
// OP-NEXT: 3,
// OP-NEXT: 8
// OP-NEXT: ]
