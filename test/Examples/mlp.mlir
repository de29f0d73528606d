// The MLP example compiles into 4 stages and 8 micro-batches and its schedule verifies.
// RUN: gpipe-opt %examples/mlp/mlp.mlir --verify-roundtrip | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: gpipe-opt %examples/mlp/mlp.mlir --gpipe-compile="num-stages=4 num-microbatches=8" | FileCheck %s

// ROUNDTRIP: gpipe.model @mlp batch 64

// CHECK: gpipe.stage @stage0 index 0
// CHECK: gpipe.stage @stage3 index 3
// CHECK: gpipe.schedule @mlp_schedule model @mlp microbatches 8 rows [8, 8, 8, 8, 8, 8, 8, 8]
// CHECK-COUNT-4: gpipe.program device
