// The MLP example compiles into 4 stages and 8 micro-batches with either objective, and its schedule verifies.
// RUN: gpipe-opt %examples/mlp/mlp.mlir --verify-roundtrip | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: gpipe-opt %examples/mlp/mlp.mlir --gpipe-compile="num-stages=4 num-microbatches=8" | FileCheck %s
// RUN: gpipe-opt %examples/mlp/mlp.mlir --gpipe-compile="num-stages=4 num-microbatches=8 objective=bottleneck" --gpipe-report -o /dev/null | FileCheck %s --check-prefix=REPORT

// ROUNDTRIP: gpipe.model @mlp batch 64

// CHECK: gpipe.stage @stage0 index 0
// CHECK: gpipe.stage @stage3 index 3
// CHECK: gpipe.schedule @mlp_schedule model @mlp microbatches 8 rows [8, 8, 8, 8, 8, 8, 8, 8]
// CHECK-COUNT-4: gpipe.program device

// fc1 (784x512) is the heaviest layer; the bottleneck split pairs it with one hidden layer.
// REPORT: 0 {{.*}} fc1, fc2
// REPORT-NEXT: 1 {{.*}} fc3, fc4
// REPORT-NEXT: 2 {{.*}} fc5, fc6
// REPORT-NEXT: 3 {{.*}} fc7, fc8, fc9, loss
