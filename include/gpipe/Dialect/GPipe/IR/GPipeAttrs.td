//===- GPipeAttrs.td - gpipe attributes and enums -----------*- tablegen -*-===//

#ifndef GPIPE_ATTRS_TD
#define GPIPE_ATTRS_TD

include "gpipe/Dialect/GPipe/IR/GPipeDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def GPipe_CostAttr : AttrDef<GPipe_Dialect, "Cost"> {
  let mnemonic = "cost";
  let summary = "forward cost of an op, a layer or a stage";
  let description = [{
    `flops` counts forward floating-point operations (a multiply-add is two);
    `param_bytes` the bytes of the parameters; `activation_bytes` the bytes of
    activations produced (and kept for the backward) at the full batch.

    ```mlir
    #gpipe.cost<flops = 1024, param_bytes = 4096, activation_bytes = 512>
    ```
  }];
  let parameters = (ins "uint64_t":$flops, "uint64_t":$param_bytes,
                        "uint64_t":$activation_bytes);
  let assemblyFormat = "`<` struct(params) `>`";
  // Every field is below 2^63: a negative number written by hand would
  // otherwise read as a huge unsigned one, and sums of costs must fit.
  let genVerifyDecl = 1;
}

def GPipe_InitKind : I32EnumAttr<"InitKind", "parameter initializer", [
    I32EnumAttrCase<"Zeros", 0, "zeros">,
    I32EnumAttrCase<"Ones", 1, "ones">,
    I32EnumAttrCase<"Normal", 2, "normal">,
    I32EnumAttrCase<"Uniform", 3, "uniform">,
    I32EnumAttrCase<"GlorotUniform", 4, "glorot_uniform">,
    // The values come from the model's weights file (ModelOp's gpipe.weights).
    I32EnumAttrCase<"Pretrained", 5, "pretrained">]> {
  let cppNamespace = "::gpipe";
}

#endif // GPIPE_ATTRS_TD
