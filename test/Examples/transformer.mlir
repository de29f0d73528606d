// The Transformer example compiles into 4 stages and 8 micro-batches: residuals cross every cut, the schedule verifies.
// RUN: gpipe-opt %examples/transformer/transformer.mlir --verify-roundtrip | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: gpipe-opt %examples/transformer/transformer.mlir --gpipe-compile="num-stages=4 num-microbatches=8" --gpipe-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: gpipe-opt %examples/transformer/transformer.mlir --gpipe-compile="num-stages=4 num-microbatches=8" | FileCheck %s

// ROUNDTRIP: gpipe.model @transformer batch 32

// Each stage receives the residual stream and the target ids go to the last stage only.
// CHECK: %[[IDS:.*]] = gpipe.input "ids"
// CHECK: %[[POS:.*]] = gpipe.input "positions"
// CHECK: %[[TGT:.*]] = gpipe.input "targets"
// CHECK: gpipe.stage @stage0 index 0 (%[[IDS]], %[[POS]])
// CHECK: gpipe.stage @stage3 index 3 (%{{.*}}, %[[TGT]])
// CHECK: gpipe.schedule @transformer_schedule model @transformer microbatches 8 rows [4, 4, 4, 4, 4, 4, 4, 4]
// CHECK: gpipe.send_activation to 1 mb 0 channel 0 : tensor<4x32x64xf32>

// REPORT: model @transformer: 4 stages, batch 32 in 8 micro-batches
// REPORT: imbalance (largest / mean stage cost): 1.0
// REPORT: bubble fraction: 0.273 for balanced stages
