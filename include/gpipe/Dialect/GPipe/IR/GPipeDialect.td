//===- GPipeDialect.td - The gpipe dialect ------------------*- tablegen -*-===//

#ifndef GPIPE_DIALECT_TD
#define GPIPE_DIALECT_TD

include "mlir/IR/OpBase.td"

def GPipe_Dialect : Dialect {
  let name = "gpipe";
  let cppNamespace = "::gpipe";
  let summary = "GPipe pipeline-parallel models, stages and schedules";
  let description = [{
    The `gpipe` dialect describes a model as a sequence of layers made of
    tensor ops, each with an optional cost. Passes partition the sequence into
    contiguous cells, outline each cell into a stage, connect the stages with
    send/recv channels and unroll the GPipe micro-batch schedule into one
    straight-line program per device.

    Conventions: dimension 0 of every model input and of every value that
    crosses a stage boundary is the batch; the model's `batch` is its size.
  }];
  let useDefaultAttributePrinterParser = 1;
}

class GPipe_Op<string mnemonic, list<Trait> traits = []>
    : Op<GPipe_Dialect, mnemonic, traits>;

#endif // GPIPE_DIALECT_TD
