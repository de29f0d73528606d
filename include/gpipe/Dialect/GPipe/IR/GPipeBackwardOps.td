//===- GPipeBackwardOps.td - stage backwards and gradient ops -*- tablegen -*-===//
//
// Written by gpipe-differentiate. A gpipe.stage_backward holds, for one
// stage, a flattened copy of the stage's forward (ops marked
// `gpipe.recompute`, parameters read through gpipe.param_ref) followed by the
// gradient ops in reverse order. Each gradient op takes the gradient of a
// forward op's result (`dy`) and, where the runtime kernel needs what the
// forward saved, that forward op's result (`forward`).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_BACKWARD_OPS_TD
#define GPIPE_BACKWARD_OPS_TD

include "gpipe/Dialect/GPipe/IR/GPipeOps.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def GPipe_StageBackwardOp : GPipe_Op<"stage_backward", [
    IsolatedFromAbove, HasParent<"ModelOp">, SingleBlock]> {
  let summary = "the backward of a stage";
  let description = [{
    `stage` names the forward stage. The block arguments are the stage's
    inputs (as stashed by the forward) followed, for every stage but the
    last, by the gradients of its outputs; the yielded values are the
    gradients of the inputs that came from the previous stage, in order.
    Parameter gradients are accumulated with gpipe.accumulate_grad. `remat`
    (written by gpipe-rematerialize) says whether the recompute prefix runs:
    `full` always, `none` never (the forward keeps its values) and
    `except-last` for all but the last micro-batch.

    ```mlir
    gpipe.stage_backward @stage1 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32> {
    ^bb0(%x: tensor<8x4xf32>, %dy: tensor<8x4xf32>):
      %0 = gpipe.relu %x {gpipe.recompute} : tensor<8x4xf32>
      %1 = gpipe.relu_grad %dy, %x : tensor<8x4xf32>
      gpipe.yield %1 : tensor<8x4xf32>
    }
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$stage,
                       TypeAttrOf<FunctionType>:$function_type,
                       OptionalAttr<StrAttr>:$remat);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat =
      "$stage attr-dict-with-keyword `:` $function_type $body";
  let hasVerifier = 1;
}

def GPipe_ParamRefOp : GPipe_Op<"param_ref", [
    Pure, HasParent<"StageBackwardOp">]> {
  let summary = "the current value of a parameter, in a stage backward";
  let arguments = (ins StrAttr:$name);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def GPipe_AccumulateGradOp : GPipe_Op<"accumulate_grad", [
    HasParent<"StageBackwardOp">]> {
  let summary = "adds a gradient to a parameter's gradient buffer";
  let description = [{
    Gradients accumulate over the micro-batches of a mini-batch; the
    optimizer step applies the sum once.
  }];
  let arguments = (ins StrAttr:$name, GPipe_FloatTensor:$grad);
  let assemblyFormat = "$name `,` $grad attr-dict `:` type($grad)";
}

def GPipe_ZerosOp : GPipe_Op<"zeros", [Pure, HasParent<"StageBackwardOp">]> {
  let summary = "a zero gradient (for an input no gradient reaches)";
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

class GPipe_GradOp<string mnemonic, list<Trait> traits = []>
    : GPipe_Op<mnemonic, !listconcat([Pure, HasParent<"StageBackwardOp">],
                                     traits)>;

// dx = f'(x) dy for element-wise ops defined by their input.
class GPipe_UnaryInputGradOp<string mnemonic, string text>
    : GPipe_GradOp<mnemonic, [AllTypesMatch<["dy", "input", "dx"]>]> {
  let summary = text;
  let arguments = (ins GPipe_FloatTensor:$dy, GPipe_FloatTensor:$input);
  let results = (outs GPipe_FloatTensor:$dx);
  let assemblyFormat = "$dy `,` $input attr-dict `:` type($dx)";
}
def GPipe_ReluGradOp : GPipe_UnaryInputGradOp<"relu_grad",
    "gradient of relu: dy where x > 0">;
def GPipe_GeluGradOp : GPipe_UnaryInputGradOp<"gelu_grad",
    "gradient of the tanh-approximated GELU">;
def GPipe_GeluErfGradOp : GPipe_UnaryInputGradOp<"gelu_erf_grad",
    "gradient of the exact GELU: dy (Phi(x) + x phi(x))">;

// dx from the forward's output for ops whose derivative is a function of it.
class GPipe_UnaryOutputGradOp<string mnemonic, string text>
    : GPipe_GradOp<mnemonic, [AllTypesMatch<["dy", "forward", "dx"]>]> {
  let summary = text;
  let arguments = (ins GPipe_FloatTensor:$dy, GPipe_FloatTensor:$forward);
  let results = (outs GPipe_FloatTensor:$dx);
  let assemblyFormat = "$dy `,` $forward attr-dict `:` type($dx)";
}
def GPipe_TanhGradOp : GPipe_UnaryOutputGradOp<"tanh_grad",
    "gradient of tanh from its output: dy (1 - y^2)">;
def GPipe_SoftmaxGradOp : GPipe_UnaryOutputGradOp<"softmax_grad",
    "gradient of softmax from its output: y (dy - sum(dy y))">;

def GPipe_DropoutGradOp : GPipe_GradOp<"dropout_grad",
    [AllTypesMatch<["dy", "forward", "dx"]>]> {
  let summary = "gradient of dropout: dy through the forward's mask, scaled";
  let arguments = (ins GPipe_FloatTensor:$dy, GPipe_FloatTensor:$forward);
  let results = (outs GPipe_FloatTensor:$dx);
  let assemblyFormat = "$dy `,` $forward attr-dict `:` type($dx)";
}

def GPipe_DenseGradOp : GPipe_GradOp<"dense_grad"> {
  let summary = "gradients of a matmul: dx = dy w^T, dw = x^T dy";
  let arguments = (ins GPipe_FloatTensor:$dy, GPipe_FloatTensor:$input,
                       GPipe_FloatTensor:$weight);
  let results = (outs GPipe_FloatTensor:$dx, GPipe_FloatTensor:$dw);
  let assemblyFormat = [{
    $dy `,` $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_BiasGradOp : GPipe_GradOp<"bias_grad"> {
  let summary = "gradient of a bias: dy summed over all but the last dimension";
  let arguments = (ins GPipe_FloatTensor:$dy);
  let results = (outs GPipe_FloatTensor:$db);
  let assemblyFormat = "$dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def GPipe_LayerNormGradOp : GPipe_GradOp<"layer_norm_grad"> {
  let summary = "gradients of layer normalisation";
  let arguments = (ins GPipe_FloatTensor:$dy, GPipe_FloatTensor:$forward,
                       GPipe_FloatTensor:$input, GPipe_FloatTensor:$gamma,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs GPipe_FloatTensor:$dx, GPipe_FloatTensor:$dgamma,
                      GPipe_FloatTensor:$dbeta);
  let assemblyFormat = [{
    $dy `,` $forward `,` $input `,` $gamma attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_BatchNormGradOp : GPipe_GradOp<"batch_norm_grad"> {
  let summary = "gradients of batch normalisation through its micro-batch statistics";
  let arguments = (ins GPipe_FloatTensor:$dy, GPipe_FloatTensor:$forward,
                       GPipe_FloatTensor:$input, GPipe_FloatTensor:$gamma);
  let results = (outs GPipe_FloatTensor:$dx, GPipe_FloatTensor:$dgamma,
                      GPipe_FloatTensor:$dbeta);
  let assemblyFormat = [{
    $dy `,` $forward `,` $input `,` $gamma attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_EmbeddingGradOp : GPipe_GradOp<"embedding_grad"> {
  let summary = "gradient of an embedding table: rows of dy added at their ids";
  let arguments = (ins GPipe_FloatTensor:$dy, GPipe_IndexTensor:$ids);
  let results = (outs GPipe_FloatTensor:$dtable);
  let assemblyFormat = [{
    $dy `,` $ids attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_AttentionGradOp : GPipe_GradOp<"attention_grad",
                                         [AttrSizedOperandSegments]> {
  let summary = "gradients of multi-head self-attention";
  let description = [{
    The operands after `dy` and `forward` are the forward's; a biased
    attention passes its biases (for their shapes) and gets their gradients
    as two more results, `bias_grads`: the column sums of the projection's
    gradient dqkv [3D] and of dy [D].

    ```mlir
    %dx, %dwqkv, %dwo, %dbqkv, %dbo = gpipe.attention_grad %dy, %y, %x, %wqkv, %wo bias %bqkv, %bo heads 4 : (tensor<8x16x64xf32>, tensor<8x16x64xf32>, tensor<8x16x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>, tensor<192xf32>, tensor<64xf32>) -> (tensor<8x16x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>, tensor<192xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins GPipe_FloatTensor:$dy, GPipe_FloatTensor:$forward,
                       GPipe_FloatTensor:$input, GPipe_FloatTensor:$qkv_weight,
                       GPipe_FloatTensor:$out_weight,
                       Optional<GPipe_FloatTensor>:$qkv_bias,
                       Optional<GPipe_FloatTensor>:$out_bias,
                       ConfinedAttr<I64Attr, [IntPositive]>:$heads,
                       UnitAttr:$causal);
  let results = (outs GPipe_FloatTensor:$dx, GPipe_FloatTensor:$dqkv_weight,
                      GPipe_FloatTensor:$dout_weight,
                      Variadic<GPipe_FloatTensor>:$bias_grads);
  let assemblyFormat = [{
    $dy `,` $forward `,` $input `,` $qkv_weight `,` $out_weight
    (`bias` $qkv_bias^ `,` $out_bias)? `heads` $heads (`causal` $causal^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_Conv2dGradOp : GPipe_GradOp<"conv2d_grad"> {
  let summary = "gradients of a 2-D convolution: dx and dw";
  let description = [{
    The attributes are the forward's; the bias's gradient is a
    gpipe.bias_grad of dy (channels last: a column sum).
  }];
  let arguments = (ins GPipe_FloatTensor:$dy, GPipe_FloatTensor:$input,
                       GPipe_FloatTensor:$weight,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntPositive]>,
                                         "1">:$groups);
  let results = (outs GPipe_FloatTensor:$dx, GPipe_FloatTensor:$dw);
  let assemblyFormat = [{
    $dy `,` $input `,` $weight `stride` $stride `padding` $padding
    (`groups` $groups^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_MaxPool2dGradOp : GPipe_GradOp<"max_pool2d_grad"> {
  let summary = "gradient of max pooling: dy to each window's first maximum";
  let arguments = (ins GPipe_FloatTensor:$dy, GPipe_FloatTensor:$input,
                       DenseI64ArrayAttr:$window, DenseI64ArrayAttr:$stride,
                       DenseI64ArrayAttr:$padding);
  let results = (outs GPipe_FloatTensor:$dx);
  let assemblyFormat = [{
    $dy `,` $input `window` $window `stride` $stride `padding` $padding
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_AvgPool2dGradOp : GPipe_GradOp<"avg_pool2d_grad"> {
  let summary = "gradient of average pooling, shaped as the forward's input";
  let arguments = (ins GPipe_FloatTensor:$dy, DenseI64ArrayAttr:$window,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding);
  let results = (outs GPipe_FloatTensor:$dx);
  let assemblyFormat = [{
    $dy `window` $window `stride` $stride `padding` $padding attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_GlobalAvgPoolGradOp : GPipe_GradOp<"global_avg_pool_grad"> {
  let summary = "gradient of global average pooling: dy / (H W) at every pixel";
  let arguments = (ins GPipe_FloatTensor:$dy);
  let results = (outs GPipe_FloatTensor:$dx);
  let assemblyFormat = "$dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def GPipe_FlattenGradOp : GPipe_GradOp<"flatten_grad"> {
  let summary = "gradient of flatten: dy in the forward input's shape";
  let arguments = (ins GPipe_FloatTensor:$dy);
  let results = (outs GPipe_FloatTensor:$dx);
  let assemblyFormat = "$dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def GPipe_SoftmaxCrossEntropyGradOp : GPipe_GradOp<"softmax_cross_entropy_grad"> {
  let summary = "gradient of the mean cross-entropy with respect to the logits";
  let description = [{
    `forward` is the loss the forward computed (its saved softmax is used).
    The result is scaled at run time by the micro-batch's share of the batch.
  }];
  let arguments = (ins GPipe_ScalarLoss:$forward, GPipe_IndexTensor:$labels);
  let results = (outs GPipe_FloatTensor:$dlogits);
  let assemblyFormat = [{
    $forward `,` $labels attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_MseLossGradOp : GPipe_GradOp<"mse_loss_grad",
    [AllTypesMatch<["prediction", "target", "dprediction"]>]> {
  let summary = "gradient of the mean squared error with respect to the prediction";
  let arguments = (ins GPipe_FloatTensor:$prediction,
                       GPipe_FloatTensor:$target);
  let results = (outs GPipe_FloatTensor:$dprediction);
  let assemblyFormat = "$prediction `,` $target attr-dict `:` type($dprediction)";
}

#endif // GPIPE_BACKWARD_OPS_TD
