// Kernels over typed elements: a comparison's i1 result is stored as an i32
// word (every element takes 4 bytes), so its value is "i32" in the bundle
// and the kernel lists each memref's element type ("types", only where one
// is not f32). A comparison writes the mask, `and` reads two; where reads
// one with its f32 branches (fused with the mul before it); a cast round
// trip is one kernel.
// RUN: gpipe-opt %S/../Dialect/GPipe/logic.mlir -gpipe-compile="num-stages=1 num-microbatches=2" | gpipe-translate --gpipe-to-bundle | FileCheck %s

// CHECK: "kernels": [
// CHECK: "ops": "rank 2: in0(0,1) in1(1) -> out(0,1):i1; gt(in0,in1)->out",
// CHECK: "types": [
// CHECK-NEXT: "f32",
// CHECK-NEXT: "f32",
// CHECK-NEXT: "i32"
// CHECK-NEXT: ]
// CHECK: "ops": "rank 2: in0(0,1):i1 in1(1):i1 -> out(0,1):i1; and(in0,in1)->out",
// CHECK: "types": [
// CHECK-NEXT: "i32",
// CHECK-NEXT: "i32",
// CHECK-NEXT: "i32"
// CHECK-NEXT: ]
// CHECK: "ops": "rank 3: in0(0,1,2) in1(1) in2(0,1,2):i1 in3(2) -> out(0,1,2); mul(in0,in1)->t0; where(in2,t0,in3)->out",
// CHECK: "ops": "rank 1: in0(0) -> out(0); cast_i32(in0)->t0; cast_f32(t0)->out",
// CHECK-NOT: "types"
// CHECK: "ops": "rank 1: in0(0):i1 -> out(0); cast_f32(in0)->out",
// CHECK: "ops": "rank 1: in0(0) in1(0):i1 -> out(0); where_lhs_grad(in0,in1)->out",

// The mask value is stored as i32.
// CHECK: "values": [
// CHECK: "type": "i32"
