//===- GPipeElementwiseOps.td - general element-wise ops -*- tablegen -*-===//
//
// The general element-wise ops and their gradients. No runtime kernel is
// written for any of them by hand: the bundle emission fuses each run of them
// (KernelRegions.h) into a kernel the compiler generates through MLIR
// (KernelToLinalg.h, NativeKernels.h). Binary ops broadcast as NumPy does:
// shapes align at their last dimension, and a dimension of size 1 (or a
// missing leading one) stretches to the other operand's. The reductions sum,
// average or take the maximum over `axes`; their result keeps each reduced
// axis as size 1 or drops it (keepdims), as its type says.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_ELEMENTWISE_OPS_TD
#define GPIPE_ELEMENTWISE_OPS_TD

include "gpipe/Dialect/GPipe/IR/GPipeOps.td"
include "gpipe/Dialect/GPipe/IR/GPipeBackwardOps.td"

// Marks the ops that only generated kernels compute.
def GPipe_GeneratedKernel : NativeOpTrait<"GeneratedKernel"> {
  let cppNamespace = "::gpipe::traits";
}

class GPipe_ElementwiseUnaryOp<string mnemonic, string text>
    : GPipe_ComputeOp<mnemonic, [AllTypesMatch<["input", "result"]>,
                                 GPipe_GeneratedKernel]> {
  let summary = text;
  let arguments = !con((ins GPipe_FloatTensor:$input), CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

// `: T` when both operands and the result have type T, else
// `: T_lhs, T_rhs -> T_result`.
class GPipe_ElementwiseBinaryOp<string mnemonic, string text>
    : GPipe_ComputeOp<mnemonic, [GPipe_GeneratedKernel]> {
  let summary = text;
  let arguments = !con((ins GPipe_FloatTensor:$lhs, GPipe_FloatTensor:$rhs),
                       CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:`
    custom<BroadcastTypes>(type($lhs), type($rhs), type($result))
  }];
  let hasVerifier = 1;
}

def GPipe_NegOp : GPipe_ElementwiseUnaryOp<"neg", "element-wise -x">;
def GPipe_AbsOp : GPipe_ElementwiseUnaryOp<"abs", "element-wise |x|">;
def GPipe_ExpOp : GPipe_ElementwiseUnaryOp<"exp", "element-wise e^x">;
def GPipe_LogOp : GPipe_ElementwiseUnaryOp<"log", "element-wise natural logarithm">;
def GPipe_SqrtOp : GPipe_ElementwiseUnaryOp<"sqrt", "element-wise square root">;
def GPipe_RsqrtOp : GPipe_ElementwiseUnaryOp<"rsqrt", "element-wise 1 / sqrt(x)">;
def GPipe_ReciprocalOp : GPipe_ElementwiseUnaryOp<"reciprocal", "element-wise 1 / x">;
def GPipe_SigmoidOp : GPipe_ElementwiseUnaryOp<"sigmoid", "element-wise 1 / (1 + e^-x)">;
def GPipe_SiluOp : GPipe_ElementwiseUnaryOp<"silu", "element-wise x sigmoid(x) (swish)">;
def GPipe_ErfOp : GPipe_ElementwiseUnaryOp<"erf", "element-wise error function">;
def GPipe_SinOp : GPipe_ElementwiseUnaryOp<"sin", "element-wise sine">;
def GPipe_CosOp : GPipe_ElementwiseUnaryOp<"cos", "element-wise cosine">;

def GPipe_ClipOp : GPipe_ComputeOp<"clip", [AllTypesMatch<["input", "result"]>,
                                            GPipe_GeneratedKernel]> {
  let summary = "element-wise min(max(x, min), max); NaN stays NaN (torch.clamp)";
  let description = [{
    `min` <= `max`, both finite. ReLU6 is `clip min 0.0 max 6.0`.

    ```mlir
    %y = gpipe.clip %x min 0.0 max 6.0 : tensor<8x16xf32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$input, F32Attr:$min,
                            F32Attr:$max), CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat =
      "$input `min` $min `max` $max attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def GPipe_SubOp : GPipe_ElementwiseBinaryOp<"sub", "element-wise lhs - rhs">;
def GPipe_MulOp : GPipe_ElementwiseBinaryOp<"mul", "element-wise product">;
def GPipe_DivOp : GPipe_ElementwiseBinaryOp<"div", "element-wise lhs / rhs">;
def GPipe_PowOp : GPipe_ElementwiseBinaryOp<"pow", "element-wise lhs ^ rhs">;
def GPipe_MaxOp : GPipe_ElementwiseBinaryOp<"max",
    "element-wise maximum; NaN if either is NaN (torch.maximum)">;
def GPipe_MinOp : GPipe_ElementwiseBinaryOp<"min",
    "element-wise minimum; NaN if either is NaN (torch.minimum)">;

// Gradients: dx from dy and one forward value (its input x or result y, as
// the summary says), or from dy and both operands of a binary op.
class GPipe_ElementwiseGradOp<string mnemonic, string text>
    : GPipe_GradOp<mnemonic, [AllTypesMatch<["dy", "primal", "dx"]>,
                              GPipe_GeneratedKernel]> {
  let summary = text;
  let arguments = (ins GPipe_FloatTensor:$dy, GPipe_FloatTensor:$primal);
  let results = (outs GPipe_FloatTensor:$dx);
  let assemblyFormat = "$dy `,` $primal attr-dict `:` type($dx)";
}

// dx is shaped as dy, the broadcast result; lhs and rhs broadcast to it
// (gpipe-differentiate sums dx down to the operand's shape: gpipe.sum_to).
// `: T` when dy, lhs and rhs have type T, else `: T_dy, T_lhs, T_rhs`.
class GPipe_ElementwiseBinaryGradOp<string mnemonic, string text>
    : GPipe_GradOp<mnemonic, [AllTypesMatch<["dy", "dx"]>,
                              GPipe_GeneratedKernel]> {
  let summary = text;
  let arguments = (ins GPipe_FloatTensor:$dy, GPipe_FloatTensor:$lhs,
                       GPipe_FloatTensor:$rhs);
  let results = (outs GPipe_FloatTensor:$dx);
  let assemblyFormat = [{
    $dy `,` $lhs `,` $rhs attr-dict `:`
    custom<SameOrListedTypes>(type($dy), type($lhs), type($rhs))
  }];
  let hasVerifier = 1;
}

def GPipe_AbsGradOp : GPipe_ElementwiseGradOp<"abs_grad",
    "gradient of abs from x: dy sign(x) (0 at 0, NaN at NaN)">;
def GPipe_ExpGradOp : GPipe_ElementwiseGradOp<"exp_grad",
    "gradient of exp from y: dy y">;
def GPipe_LogGradOp : GPipe_ElementwiseGradOp<"log_grad",
    "gradient of log from x: dy / x">;
def GPipe_SqrtGradOp : GPipe_ElementwiseGradOp<"sqrt_grad",
    "gradient of sqrt from y: dy / (2 y)">;
def GPipe_RsqrtGradOp : GPipe_ElementwiseGradOp<"rsqrt_grad",
    "gradient of rsqrt from y: -dy y^3 / 2">;
def GPipe_ReciprocalGradOp : GPipe_ElementwiseGradOp<"reciprocal_grad",
    "gradient of reciprocal from y: -dy y^2">;
def GPipe_SigmoidGradOp : GPipe_ElementwiseGradOp<"sigmoid_grad",
    "gradient of sigmoid from y: dy y (1 - y)">;
def GPipe_SiluGradOp : GPipe_ElementwiseGradOp<"silu_grad",
    "gradient of silu from x: dy s (1 + x (1 - s)), s = sigmoid(x)">;
def GPipe_ErfGradOp : GPipe_ElementwiseGradOp<"erf_grad",
    "gradient of erf from x: dy 2 / sqrt(pi) e^(-x^2)">;
def GPipe_SinGradOp : GPipe_ElementwiseGradOp<"sin_grad",
    "gradient of sin from x: dy cos(x)">;
def GPipe_CosGradOp : GPipe_ElementwiseGradOp<"cos_grad",
    "gradient of cos from x: -dy sin(x)">;
def GPipe_ClipGradOp : GPipe_GradOp<"clip_grad",
    [AllTypesMatch<["dy", "input", "dx"]>, GPipe_GeneratedKernel]> {
  let summary = "gradient of clip from x: dy where min < x < max, else 0 (PyTorch: 0 at the bounds)";
  let arguments = (ins GPipe_FloatTensor:$dy, GPipe_FloatTensor:$input,
                       F32Attr:$min, F32Attr:$max);
  let results = (outs GPipe_FloatTensor:$dx);
  let assemblyFormat =
      "$dy `,` $input `min` $min `max` $max attr-dict `:` type($dx)";
}
def GPipe_DivRhsGradOp : GPipe_ElementwiseBinaryGradOp<"div_rhs_grad",
    "gradient of div for its divisor, from y = lhs / rhs and rhs: -dy y / rhs">;
def GPipe_PowLhsGradOp : GPipe_ElementwiseBinaryGradOp<"pow_lhs_grad",
    "gradient of pow for its base: dy b a^(b - 1), 0 where b = 0">;
def GPipe_PowRhsGradOp : GPipe_ElementwiseBinaryGradOp<"pow_rhs_grad",
    "gradient of pow for its exponent: dy a^b log(a), 0 where a = 0 and b >= 0">;
def GPipe_MaxLhsGradOp : GPipe_ElementwiseBinaryGradOp<"max_lhs_grad",
    "gradient of max for lhs: dy where lhs > rhs, dy / 2 where they tie">;
def GPipe_MinLhsGradOp : GPipe_ElementwiseBinaryGradOp<"min_lhs_grad",
    "gradient of min for lhs: dy where lhs < rhs, dy / 2 where they tie">;

//===----------------------------------------------------------------------===//
// Broadcasting and reductions
//===----------------------------------------------------------------------===//

def GPipe_BroadcastToOp : GPipe_ComputeOp<"broadcast_to",
    [GPipe_GeneratedKernel]> {
  let summary = "the input stretched to the result's shape (NumPy broadcasting)";
  let description = [{
    With `batch`, the input (not per example, size 1 in dimension 0) is
    stretched over the batch: the result is per example, and each
    micro-batch gets its own rows of it (a class token expanded to every
    example, token-type embeddings of a constant).

    ```mlir
    %y = gpipe.broadcast_to %x : tensor<1x16xf32> -> tensor<8x16xf32>
    %cls = gpipe.broadcast_to %token batch : tensor<1x1x64xf32> -> tensor<8x1x64xf32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$input, UnitAttr:$batch),
                       CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat =
      "$input (`batch` $batch^)? attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def GPipe_SumToOp : GPipe_ComputeOp<"sum_to", [GPipe_GeneratedKernel]> {
  let summary = "sums the input down to a shape that broadcasts to it";
  let description = [{
    The gradient of broadcasting: every element of the result is the sum of
    the input's elements it was stretched to (PyTorch's sum_to_size).

    ```mlir
    %db = gpipe.sum_to %dy : tensor<8x4x16xf32> -> tensor<1x16xf32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$input), CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

// `axes`: strictly ascending, in [0, rank). The result is the input's shape
// with each axis of `axes` set to 1 (keepdims) or removed.
class GPipe_ReduceOp<string mnemonic, string text>
    : GPipe_ComputeOp<mnemonic, [GPipe_GeneratedKernel]> {
  let summary = text;
  let arguments = !con((ins GPipe_FloatTensor:$input,
                            DenseI64ArrayAttr:$axes), CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat =
      "$input `axes` $axes attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def GPipe_ReduceSumOp : GPipe_ReduceOp<"reduce_sum", "sum over `axes`">;
def GPipe_ReduceMeanOp : GPipe_ReduceOp<"reduce_mean", "mean over `axes`">;
def GPipe_ReduceMaxOp : GPipe_ReduceOp<"reduce_max",
    "maximum over `axes`; NaN if any element is NaN (torch.amax)"> {
  let description = [{
    ```mlir
    %m = gpipe.reduce_max %x axes [1] : tensor<8x16xf32> -> tensor<8x1xf32>
    ```
  }];
}

// The reductions' gradients. `dy` has the reduction's result shape; each op
// stretches it along `axes` to dx, shaped as the reduction's input.
class GPipe_ReduceGradOp<string mnemonic, string text,
                         list<Trait> traits = []>
    : GPipe_GradOp<mnemonic, !listconcat([GPipe_GeneratedKernel], traits)> {
  let summary = text;
  let results = (outs GPipe_FloatTensor:$dx);
  let hasVerifier = 1;
}

def GPipe_ReduceSumGradOp : GPipe_ReduceGradOp<"reduce_sum_grad",
    "gradient of reduce_sum: dy stretched along `axes`"> {
  let arguments = (ins GPipe_FloatTensor:$dy, DenseI64ArrayAttr:$axes);
  let assemblyFormat =
      "$dy `axes` $axes attr-dict `:` type($dy) `->` type($dx)";
}
def GPipe_ReduceMeanGradOp : GPipe_ReduceGradOp<"reduce_mean_grad",
    "gradient of reduce_mean: dy stretched along `axes`, over their element count"> {
  let arguments = (ins GPipe_FloatTensor:$dy, DenseI64ArrayAttr:$axes);
  let assemblyFormat =
      "$dy `axes` $axes attr-dict `:` type($dy) `->` type($dx)";
}
def GPipe_ReduceMaxCountOp : GPipe_ReduceGradOp<"reduce_max_count",
    "how many elements along `axes` equal the maximum y (at least 1 unless y is NaN)",
    [AllTypesMatch<["max", "dx"]>]> {
  let arguments = (ins GPipe_FloatTensor:$input, GPipe_FloatTensor:$max,
                       DenseI64ArrayAttr:$axes);
  let assemblyFormat = [{
    $input `,` $max `axes` $axes attr-dict `:` type($input) `,` type($max)
    `->` type($dx)
  }];
}
def GPipe_ReduceMaxGradOp : GPipe_ReduceGradOp<"reduce_max_grad",
    "gradient of reduce_max: dy / count where x equals the maximum, else 0 (torch.amax: ties share)",
    [AllTypesMatch<["dy", "max", "count"]>, AllTypesMatch<["input", "dx"]>]> {
  let arguments = (ins GPipe_FloatTensor:$dy, GPipe_FloatTensor:$input,
                       GPipe_FloatTensor:$max, GPipe_FloatTensor:$count,
                       DenseI64ArrayAttr:$axes);
  let assemblyFormat = [{
    $dy `,` $input `,` $max `,` $count `axes` $axes attr-dict `:`
    type($dy) `,` type($input) `->` type($dx)
  }];
}

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

def GPipe_ReshapeOp : GPipe_ComputeOp<"reshape", [GPipe_GeneratedKernel]> {
  let summary = "the input's elements, in order, in another shape";
  let description = [{
    The element count stays; a per-example value keeps its batch as
    dimension 0. Squeeze and unsqueeze are reshapes.

    ```mlir
    %h = gpipe.reshape %x : tensor<8x16x64xf32> -> tensor<8x16x4x16xf32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$input), CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def GPipe_TransposeOp : GPipe_ComputeOp<"transpose", [GPipe_GeneratedKernel]> {
  let summary = "the input's dimensions permuted: result dim i is input dim perm[i]";
  let description = [{
    ```mlir
    %t = gpipe.transpose %h perm [0, 2, 1, 3] : tensor<8x16x4x16xf32> -> tensor<8x4x16x16xf32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$input,
                            DenseI64ArrayAttr:$perm), CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat =
      "$input `perm` $perm attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def GPipe_SliceOp : GPipe_ComputeOp<"slice", [GPipe_GeneratedKernel]> {
  let summary = "every `steps`-th element from `starts`, as many as the result holds";
  let description = [{
    Result element i (along each dimension d) is input element
    starts[d] + i * steps[d]: `starts` in [0, size), `steps` >= 1, and the
    last element read in range. ONNX's Slice with positive steps, Python's
    x[a:b:c]; a split is one slice per part.

    ```mlir
    %half = gpipe.slice %x starts [0, 0, 32] steps [1, 1, 1] : tensor<8x16x64xf32> -> tensor<8x16x32xf32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$input,
                            DenseI64ArrayAttr:$starts,
                            DenseI64ArrayAttr:$steps), CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = [{
    $input `starts` $starts `steps` $steps attr-dict `:` type($input) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def GPipe_SliceGradOp : GPipe_GradOp<"slice_grad", [GPipe_GeneratedKernel]> {
  let summary = "the gradient of a slice: dy at the slice's elements, 0 elsewhere";
  let description = [{
    ```mlir
    %dx = gpipe.slice_grad %dy starts [0, 0, 32] steps [1, 1, 1] : tensor<8x16x32xf32> -> tensor<8x16x64xf32>
    ```
  }];
  let arguments = (ins GPipe_FloatTensor:$dy, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$steps);
  let results = (outs GPipe_FloatTensor:$dx);
  let assemblyFormat = [{
    $dy `starts` $starts `steps` $steps attr-dict `:` type($dy) `->`
    type($dx)
  }];
  let hasVerifier = 1;
}

def GPipe_ConcatOp : GPipe_ComputeOp<"concat", [GPipe_GeneratedKernel]> {
  let summary = "the inputs one after another along `axis`";
  let description = [{
    Two or more inputs of one rank and element type, equal in every
    dimension but `axis`; the result's `axis` is the sum of theirs. Its
    gradient is a slice of dy per input.

    ```mlir
    %y = gpipe.concat %a, %b axis 2 : tensor<8x16x32xf32>, tensor<8x16x32xf32> -> tensor<8x16x64xf32>
    ```
  }];
  let arguments = !con((ins Variadic<GPipe_FloatTensor>:$inputs,
                            I64Attr:$axis), CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = [{
    $inputs `axis` $axis attr-dict `:` type($inputs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def GPipe_GatherOp : GPipe_ComputeOp<"gather", [GPipe_GeneratedKernel]> {
  let summary = "the input's elements at `indices` along `axis`";
  let description = [{
    The result is the input with its dimension `axis` replaced by the
    indices': result element i along `axis` is input element indices[i]
    there (ONNX's Gather with 1-D indices; `torch.index_select`). With
    `batched`, the indices are per example, [batch, k]: example b reads
    positions indices[b, :] of its own rows (TensorFlow's `batch_dims=1`).
    An index in [-n, n) for an axis of n elements (a negative one counts
    from the end); a result element whose index is outside reads NaN, and
    gets no gradient. N-D indices: reshape them to 1-D, gather, and reshape
    the result. The gradient adds dy into the positions read, repeated
    indices summed.

    ```mlir
    %cls = gpipe.gather %h[%first] axis 1 : tensor<8x16x64xf32>, tensor<1xi32> -> tensor<8x1x64xf32>
    %eos = gpipe.gather %h[%ends] axis 1 batched : tensor<8x16x64xf32>, tensor<8x1xi32> -> tensor<8x1x64xf32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$input, RankedTensorOf<[I32]>:$indices,
                            I64Attr:$axis, UnitAttr:$batched), CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = [{
    $input `[` $indices `]` `axis` $axis (`batched` $batched^)? attr-dict `:`
    type($input) `,` type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

def GPipe_GatherGradOp : GPipe_GradOp<"gather_grad", [GPipe_GeneratedKernel]> {
  let summary = "the gradient of a gather: dy added into the positions read";
  let description = [{
    0 where no index points, the sum of dy over the indices that point
    there elsewhere (in index order).

    ```mlir
    %dh = gpipe.gather_grad %dy[%first] axis 1 : tensor<8x1x64xf32>, tensor<1xi32> -> tensor<8x16x64xf32>
    ```
  }];
  let arguments = (ins GPipe_FloatTensor:$dy, RankedTensorOf<[I32]>:$indices,
                       I64Attr:$axis, UnitAttr:$batched);
  let results = (outs GPipe_FloatTensor:$dx);
  let assemblyFormat = [{
    $dy `[` $indices `]` `axis` $axis (`batched` $batched^)? attr-dict `:`
    type($dy) `,` type($indices) `->` type($dx)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Comparisons, logic, selection and casts
//===----------------------------------------------------------------------===//

// i1 results; operands that broadcast (NumPy's rules). A comparison with a
// NaN is false (IEEE's ordered predicates).
class GPipe_CompareOp<string mnemonic, string text>
    : GPipe_ComputeOp<mnemonic, [GPipe_GeneratedKernel]> {
  let summary = text;
  let arguments = !con((ins GPipe_FloatTensor:$lhs, GPipe_FloatTensor:$rhs),
                       CostArg);
  let results = (outs GPipe_BoolTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:`
    custom<BroadcastTypes>(type($lhs), type($rhs), type($result))
  }];
  let hasVerifier = 1;
}
def GPipe_EqOp : GPipe_CompareOp<"eq", "element-wise lhs == rhs">;
def GPipe_LtOp : GPipe_CompareOp<"lt", "element-wise lhs < rhs">;
def GPipe_LeOp : GPipe_CompareOp<"le", "element-wise lhs <= rhs">;
def GPipe_GtOp : GPipe_CompareOp<"gt", "element-wise lhs > rhs">;
def GPipe_GeOp : GPipe_CompareOp<"ge", "element-wise lhs >= rhs">;

class GPipe_LogicalBinaryOp<string mnemonic, string text>
    : GPipe_ComputeOp<mnemonic, [GPipe_GeneratedKernel]> {
  let summary = text;
  let arguments = !con((ins GPipe_BoolTensor:$lhs, GPipe_BoolTensor:$rhs),
                       CostArg);
  let results = (outs GPipe_BoolTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:`
    custom<BroadcastTypes>(type($lhs), type($rhs), type($result))
  }];
  let hasVerifier = 1;
}
def GPipe_AndOp : GPipe_LogicalBinaryOp<"and", "element-wise lhs and rhs">;
def GPipe_OrOp : GPipe_LogicalBinaryOp<"or", "element-wise lhs or rhs">;

def GPipe_NotOp : GPipe_ComputeOp<"not", [AllTypesMatch<["input", "result"]>,
                                          GPipe_GeneratedKernel]> {
  let summary = "element-wise logical negation";
  let arguments = !con((ins GPipe_BoolTensor:$input), CostArg);
  let results = (outs GPipe_BoolTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def GPipe_WhereOp : GPipe_ComputeOp<"where", [GPipe_GeneratedKernel]> {
  let summary = "element-wise cond ? lhs : rhs, the three broadcasting";
  let description = [{
    A mask that keeps or replaces values (torch.where, ONNX Where). Its
    gradient goes to lhs where cond holds and to rhs elsewhere.

    ```mlir
    %y = gpipe.where %mask, %s, %fill : tensor<1x16x16xi1>, tensor<8x16x16xf32>, tensor<1xf32> -> tensor<8x16x16xf32>
    ```
  }];
  let arguments = !con((ins GPipe_BoolTensor:$cond, GPipe_FloatTensor:$lhs,
                            GPipe_FloatTensor:$rhs), CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = [{
    $cond `,` $lhs `,` $rhs attr-dict `:` type($cond) `,` type($lhs) `,`
    type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

// dy where cond holds (lhs_grad) or where it does not (rhs_grad), 0
// elsewhere: never dy times a 0/1 mask, which would turn an infinite dy
// into NaN where it is masked.
class GPipe_WhereGradOp<string mnemonic, string text>
    : GPipe_GradOp<mnemonic, [AllTypesMatch<["dy", "dx"]>,
                               GPipe_GeneratedKernel]> {
  let summary = text;
  let arguments = (ins GPipe_FloatTensor:$dy, GPipe_BoolTensor:$cond);
  let results = (outs GPipe_FloatTensor:$dx);
  let assemblyFormat = "$dy `,` $cond attr-dict `:` type($dy) `,` type($cond)";
  let hasVerifier = 1;
}
def GPipe_WhereLhsGradOp : GPipe_WhereGradOp<"where_lhs_grad",
    "cond ? dy : 0">;
def GPipe_WhereRhsGradOp : GPipe_WhereGradOp<"where_rhs_grad",
    "cond ? 0 : dy">;

def GPipe_CastOp : GPipe_ComputeOp<"cast", [GPipe_GeneratedKernel]> {
  let summary = "element-wise conversion between f32, i32 and i1";
  let description = [{
    f32 to i32 rounds toward zero and saturates (NaN gives 0); to i1 is
    x != 0 (NaN gives true, as C's bool); i1 to a number is 0 or 1. An f32
    to f32 cast is the identity (its gradient dy); the others have none.

    ```mlir
    %m = gpipe.cast %ids : tensor<8x16xi32> -> tensor<8x16xf32>
    ```
  }];
  let arguments = !con((ins GPipe_CastableTensor:$input), CostArg);
  let results = (outs GPipe_CastableTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

#endif // GPIPE_ELEMENTWISE_OPS_TD
