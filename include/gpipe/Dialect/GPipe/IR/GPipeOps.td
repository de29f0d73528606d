//===- GPipeOps.td - gpipe operations -----------------------*- tablegen -*-===//

#ifndef GPIPE_OPS_TD
#define GPIPE_OPS_TD

include "gpipe/Dialect/GPipe/IR/GPipeDialect.td"
include "gpipe/Dialect/GPipe/IR/GPipeAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

defvar CostArg = (ins OptionalAttr<GPipe_CostAttr>:$cost);
defvar NonNegI64 = ConfinedAttr<I64Attr, [IntNonNegative]>;
defvar PosI64 = ConfinedAttr<I64Attr, [IntPositive]>;

// Element types a model may compute in. f32 today; the ops are written so that
// bf16 and f16 flow through the same verifiers.
def GPipe_FloatTensor : RankedTensorOf<[F32, BF16, F16]>;
def GPipe_IndexTensor : RankedTensorOf<[I32, I64]>;
def GPipe_BoolTensor : RankedTensorOf<[I1]>;
// What a cast converts between (an i1 is stored in 4 bytes, as every element).
def GPipe_CastableTensor : RankedTensorOf<[F32, I32, I1]>;
def GPipe_ScalarLoss : 0DTensorOf<[F32, BF16, F16]>;

//===----------------------------------------------------------------------===//
// Model structure
//===----------------------------------------------------------------------===//

def GPipe_ModelOp : GPipe_Op<"model", [
    Symbol, IsolatedFromAbove, SingleBlock]> {
  let summary = "a model: its inputs and its sequence of layers";
  let description = [{
    The body holds `gpipe.input`s, then `gpipe.layer`s in execution order
    (after `gpipe-form-stages`, `gpipe.stage`s and, after
    `gpipe-insert-send-recv`, `gpipe.send`/`gpipe.recv`), and ends with
    `gpipe.return` of the scalar loss. `batch` is the mini-batch size: the
    leading dimension of every input.

    A model with `pretrained` parameters names the safetensors file their
    values come from in the string attribute `gpipe.weights` (a relative path
    is relative to the directory of the .mlir file; the bundle writer makes it
    absolute):

    ```mlir
    gpipe.model @m batch 8 attributes {gpipe.weights = "m.safetensors"} { ... }
    ```

    ```mlir
    gpipe.model @mlp batch 32 {
      %x = gpipe.input "x" : tensor<32x784xf32>
      %y = gpipe.input "labels" : tensor<32xi32>
      %h = gpipe.layer "fc1" -> tensor<32x10xf32> {
        %w = gpipe.param "fc1.w" glorot_uniform : tensor<784x10xf32>
        %0 = gpipe.dense %x, %w : (tensor<32x784xf32>, tensor<784x10xf32>) -> tensor<32x10xf32>
        gpipe.yield %0 : tensor<32x10xf32>
      }
      %l = gpipe.layer "loss" -> tensor<f32> {
        %0 = gpipe.softmax_cross_entropy %h, %y : (tensor<32x10xf32>, tensor<32xi32>) -> tensor<f32>
        gpipe.yield %0 : tensor<f32>
      }
      gpipe.return %l : tensor<f32>
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, PosI64:$batch);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name `batch` $batch attr-dict-with-keyword $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The model's terminator, which returns the loss.
    ::gpipe::ReturnOp getReturnOp();
    /// The stage named `name`, or null.
    ::gpipe::StageOp lookupStage(::llvm::StringRef name);
    /// The attribute naming the weights file of `pretrained` parameters.
    static constexpr ::llvm::StringLiteral kWeightsAttrName = "gpipe.weights";
    /// The weights file the model names, or "" when it names none.
    ::llvm::StringRef getWeightsFile();
    /// The attribute of the precision its products read their operands in
    /// ("f32", "tf32" or "bf16"; gpipe-set-precision), which the bundle
    /// records; none: the runtime's choice.
    static constexpr ::llvm::StringLiteral kPrecisionAttrName =
        "gpipe.precision";
  }];
}

def GPipe_InputOp : GPipe_Op<"input", [HasParent<"ModelOp">, Pure]> {
  let summary = "a model input fed per micro-batch (data, labels)";
  let description = [{
    ```mlir
    %x = gpipe.input "x" : tensor<32x784xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def GPipe_ParamOp : GPipe_Op<"param", [HasParent<"LayerOp">, Pure]> {
  let summary = "a parameter owned by its layer (trained unless frozen)";
  let description = [{
    `init` names the initializer; `scale` is the standard deviation of
    `normal` and the bound of `uniform` (default 1). `pretrained` takes the
    values of the tensor of the same name (f32, the same shape) in the
    safetensors file that the model's `gpipe.weights` attribute names; the
    runtime copies them bit for bit, and the seed does not affect them.

    A `frozen` parameter is a constant of the model (a mask, a position
    table): any op may read it, it gets no gradient and the optimizer never
    changes it (nor does weight decay).

    A parameter `tied` to an earlier one (an output projection that is the
    token embedding's table) is a copy of it in another layer, declared
    alike: it starts from the same values, and before each update the
    gradients of the parameter and all its copies are summed, in the order
    they are declared, into each; so every copy takes the same update and
    they stay equal, wherever the partitioner puts their layers.

    ```mlir
    %w = gpipe.param "fc1.w" glorot_uniform : tensor<784x256xf32>
    %e = gpipe.param "emb" normal scale 0.02 : tensor<96x64xf32>
    %p = gpipe.param "fc2.w" pretrained : tensor<256x10xf32>
    %pos = gpipe.param "pos" pretrained frozen : tensor<16x64xf32>
    %out = gpipe.param "emb@head" normal scale 0.02 tied "emb" : tensor<96x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, GPipe_InitKind:$init,
                       OptionalAttr<F64Attr>:$scale, UnitAttr:$frozen,
                       OptionalAttr<StrAttr>:$tied);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat =
      "$name $init (`scale` $scale^)? (`frozen` $frozen^)? (`tied` $tied^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def GPipe_LayerOp : GPipe_Op<"layer", [
    ParentOneOf<["ModelOp", "StageOp"]>, SingleBlock]> {
  let summary = "one layer: the unit the partitioner moves between cells";
  let description = [{
    A layer owns its `gpipe.param`s and may use any value defined before it
    in the model (inputs, earlier layers' results). `cost` is written by the
    user or by `gpipe-estimate-cost`; `cell` by `gpipe-partition`.

    ```mlir
    %h = gpipe.layer "act" -> tensor<32x256xf32> attributes {cell = 0 : i64} {
      %0 = gpipe.relu %x : tensor<32x256xf32>
      gpipe.yield %0 : tensor<32x256xf32>
    }
    ```
  }];
  let arguments = !con((ins StrAttr:$name, OptionalAttr<NonNegI64>:$cell),
                       CostArg);
  let results = (outs Variadic<AnyStaticShapeTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat =
      "$name (`->` type($results)^)? attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

// Not a Symbol (symbols may not have results); the model verifier keeps stage
// names unique and schedule ops resolve them by name.
def GPipe_StageOp : GPipe_Op<"stage", [
    IsolatedFromAbove, HasParent<"ModelOp">, SingleBlock]> {
  let summary = "a cell of consecutive layers outlined with explicit inputs and outputs";
  let description = [{
    Written by `gpipe-form-stages`. Stage `index` runs on device `index`, or
    on device `index` mod K when K devices run the stages round-robin
    (interleaved schedules, `virtual_stages` on the schedule). The
    operands are the stage's inputs (model inputs it reads and values from
    the previous stage); the block arguments stand for them inside. Values
    needed by a later stage, including ones only passed through, are yielded.

    ```mlir
    %s:2 = gpipe.stage @stage1 index 1 (%a, %skip) : (tensor<32x64xf32>, tensor<32x64xf32>) -> (tensor<32x64xf32>, tensor<32x64xf32>) {
    ^bb0(%arg0: tensor<32x64xf32>, %arg1: tensor<32x64xf32>):
      ...
      gpipe.yield %h, %arg1 : tensor<32x64xf32>, tensor<32x64xf32>
    }
    ```
  }];
  let arguments = !con((ins SymbolNameAttr:$sym_name, NonNegI64:$index,
                            Variadic<AnyStaticShapeTensor>:$inputs,
                            OptionalAttr<I64Attr>:$memory_bytes),
                       CostArg);
  let results = (outs Variadic<AnyStaticShapeTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `index` $index ` ` `(` $inputs `)` attr-dict-with-keyword `:`
    functional-type($inputs, $results) $body
  }];
  let hasVerifier = 1;
}

def GPipe_YieldOp : GPipe_Op<"yield", [
    Pure, Terminator, ReturnLike,
    ParentOneOf<["LayerOp", "StageOp", "StageBackwardOp"]>]> {
  let summary = "the results of a layer, a stage or a stage backward";
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
  let hasVerifier = 1;
}

def GPipe_ReturnOp : GPipe_Op<"return", [
    Pure, Terminator, ReturnLike, HasParent<"ModelOp">]> {
  let summary = "the model's scalar loss";
  let arguments = (ins GPipe_ScalarLoss:$loss);
  let assemblyFormat = "$loss attr-dict `:` type($loss)";
}

def GPipe_SendOp : GPipe_Op<"send", [HasParent<"ModelOp">]> {
  let summary = "sends a stage output to the next stage (a pipeline channel)";
  let description = [{
    Inserted by `gpipe-insert-send-recv` with its matching `gpipe.recv`. The
    pair is one channel between devices `from` and `to`: in the forward the
    activation travels from -> to; in the backward its gradient, of the same
    type, travels to -> from. `gpipe-unroll-schedule` emits both directions per
    micro-batch.

    ```mlir
    gpipe.send %s0 from 0 to 1 channel 0 : tensor<32x256xf32>
    %r = gpipe.recv from 0 to 1 channel 0 : tensor<32x256xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$value, NonNegI64:$from, NonNegI64:$to,
                       NonNegI64:$channel);
  let assemblyFormat = [{
    $value `from` $from `to` $to `channel` $channel attr-dict `:` type($value)
  }];
  let hasVerifier = 1;
}

def GPipe_RecvOp : GPipe_Op<"recv", [HasParent<"ModelOp">]> {
  let summary = "receives a value sent by the previous stage";
  let arguments = (ins NonNegI64:$from, NonNegI64:$to, NonNegI64:$channel);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    `from` $from `to` $to `channel` $channel attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Compute ops (inside layers)
//===----------------------------------------------------------------------===//

// Compute ops live in layers and, recomputed, in stage backwards.
class GPipe_ComputeOp<string mnemonic, list<Trait> traits = []>
    : GPipe_Op<mnemonic, !listconcat(
          [Pure, ParentOneOf<["LayerOp", "StageBackwardOp"]>], traits)>;

class GPipe_UnaryOp<string mnemonic, string text>
    : GPipe_ComputeOp<mnemonic, [AllTypesMatch<["input", "result"]>]> {
  let summary = text;
  let arguments = !con((ins GPipe_FloatTensor:$input), CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def GPipe_ReluOp : GPipe_UnaryOp<"relu", "element-wise max(x, 0)">;
def GPipe_GeluOp : GPipe_UnaryOp<"gelu", "element-wise GELU (tanh approximation)">;
def GPipe_GeluErfOp : GPipe_UnaryOp<"gelu_erf",
    "element-wise exact GELU: 0.5 x (1 + erf(x / sqrt(2)))">;
def GPipe_TanhOp : GPipe_UnaryOp<"tanh", "element-wise tanh">;
def GPipe_SoftmaxOp : GPipe_UnaryOp<"softmax", "softmax over the last dimension">;

def GPipe_AddOp : GPipe_ComputeOp<"add"> {
  let summary = "element-wise sum (residual connections), NumPy broadcasting";
  let description = [{
    An add of operands of one shape runs the runtime's kernel (or a
    generated one); an add that broadcasts (a position table added to every
    example) always runs a generated kernel.

    ```mlir
    %y = gpipe.add %x, %h : tensor<8x16xf32>
    %z = gpipe.add %x, %pos : tensor<8x4x16xf32>, tensor<4x16xf32> -> tensor<8x4x16xf32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$lhs, GPipe_FloatTensor:$rhs),
                       CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:`
    custom<BroadcastTypes>(type($lhs), type($rhs), type($result))
  }];
  let hasVerifier = 1;
}

def GPipe_DenseOp : GPipe_ComputeOp<"dense"> {
  let summary = "matmul over the last dimension plus an optional bias";
  let description = [{
    `input` is [..., K], `weight` [K, N], `bias` [N]; the result is [..., N].

    ```mlir
    %y = gpipe.dense %x, %w, %b : (tensor<32x784xf32>, tensor<784x256xf32>, tensor<256xf32>) -> tensor<32x256xf32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$input, GPipe_FloatTensor:$weight,
                            Optional<GPipe_FloatTensor>:$bias), CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_MatmulOp : GPipe_ComputeOp<"matmul"> {
  let summary = "batched matrix product with broadcasting batch dimensions";
  let description = [{
    numpy.matmul for ranks >= 2: `lhs` is [A..., M, K] and `rhs` [B..., K, N]
    (each with its last two dimensions swapped where `transpose_lhs` or
    `transpose_rhs` is set); the result is [C..., M, N], C the NumPy
    broadcast of A and B. A library GEMM per batch element (CBLAS, cuBLAS).

    ```mlir
    %s = gpipe.matmul %q, %k transpose_rhs : (tensor<8x4x16x32xf32>, tensor<8x4x16x32xf32>) -> tensor<8x4x16x16xf32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$lhs, GPipe_FloatTensor:$rhs,
                            UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs),
                       CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_Conv2dOp : GPipe_ComputeOp<"conv2d"> {
  let summary = "2-D convolution over channels-last images, plus an optional bias";
  let description = [{
    `input` is [N, H, W, C] (channels last: an image's pixels are rows of C
    values, so the convolution is one GEMM over its patches), `weight`
    [KH, KW, C / groups, F] and `bias` [F]. Each of the `groups` groups
    convolves C / groups input channels into F / groups output channels.
    `stride` is [SH, SW] (>= 1) and `padding` [PH, PW] (>= 0) zero rows and
    columns on each side; the result is [N, (H + 2 PH - KH) / SH + 1,
    (W + 2 PW - KW) / SW + 1, F].

    ```mlir
    %y = gpipe.conv2d %x, %w, %b stride [1, 1] padding [1, 1] : (tensor<8x28x28x1xf32>, tensor<3x3x1x16xf32>, tensor<16xf32>) -> tensor<8x28x28x16xf32>
    %z = gpipe.conv2d %y, %v stride [2, 2] padding [1, 1] groups 4 : (tensor<8x28x28x16xf32>, tensor<3x3x4x32xf32>) -> tensor<8x14x14x32xf32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$input, GPipe_FloatTensor:$weight,
                            Optional<GPipe_FloatTensor>:$bias,
                            DenseI64ArrayAttr:$stride,
                            DenseI64ArrayAttr:$padding,
                            DefaultValuedAttr<PosI64, "1">:$groups), CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? `stride` $stride `padding` $padding
    (`groups` $groups^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

class GPipe_Pool2dOp<string mnemonic, string text, string example>
    : GPipe_ComputeOp<mnemonic> {
  let summary = text;
  let description = [{
    `input` is [N, H, W, C]. A `window` of [KH, KW] pixels slides by
    `stride` [SH, SW] (>= 1) over the input with `padding` [PH, PW] pixels
    on each side, fewer than the window's (so every window overlaps the
    image); the result is [N, (H + 2 PH - KH) / SH + 1,
    (W + 2 PW - KW) / SW + 1, C]. Padding pixels take no part: they are
    never a maximum and are not counted in a mean.
  }] # example;
  let arguments = !con((ins GPipe_FloatTensor:$input,
                            DenseI64ArrayAttr:$window,
                            DenseI64ArrayAttr:$stride,
                            DenseI64ArrayAttr:$padding), CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = [{
    $input `window` $window `stride` $stride `padding` $padding attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_MaxPool2dOp : GPipe_Pool2dOp<"max_pool2d",
    "the maximum of each channel over a sliding window", [{

    ```mlir
    %y = gpipe.max_pool2d %x window [3, 3] stride [2, 2] padding [1, 1] : (tensor<8x28x28x16xf32>) -> tensor<8x14x14x16xf32>
    ```
  }]>;

def GPipe_AvgPool2dOp : GPipe_Pool2dOp<"avg_pool2d",
    "the mean of each channel over a sliding window", [{

    ```mlir
    %y = gpipe.avg_pool2d %x window [2, 2] stride [2, 2] padding [0, 0] : (tensor<8x28x28x16xf32>) -> tensor<8x14x14x16xf32>
    ```
  }]>;

def GPipe_GlobalAvgPoolOp : GPipe_ComputeOp<"global_avg_pool"> {
  let summary = "the mean of each channel over an image's pixels";
  let description = [{
    `input` is [N, H, W, C]; the result is [N, C].

    ```mlir
    %y = gpipe.global_avg_pool %x : (tensor<8x7x7x64xf32>) -> tensor<8x64xf32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$input), CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = [{
    $input attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_FlattenOp : GPipe_ComputeOp<"flatten"> {
  let summary = "all dimensions but the batch as one";
  let description = [{
    `input` is [N, d1, ..., dk] (k >= 1); the result is [N, d1 x ... x dk],
    the same elements in the same row-major order.

    ```mlir
    %y = gpipe.flatten %x : (tensor<8x7x7x16xf32>) -> tensor<8x784xf32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$input), CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = [{
    $input attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_LayerNormOp : GPipe_ComputeOp<"layer_norm"> {
  let summary = "layer normalisation over the last dimension";
  let description = [{
    ```mlir
    %y = gpipe.layer_norm %x, %gamma, %beta : (tensor<8x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<8x16x64xf32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$input, GPipe_FloatTensor:$gamma,
                            GPipe_FloatTensor:$beta,
                            DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon),
                       CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma `,` $beta attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_BatchNormOp : GPipe_ComputeOp<"batch_norm"> {
  let summary = "batch normalisation over all but the last (channel) dimension";
  let description = [{
    `input` is [N, C] or [N, H, W, C]; `gamma`, `beta`, `running_mean` and
    `running_var` are [C]. In training, each channel is normalised with the
    mean and biased variance of the micro-batch being run (GPipe's rule);
    the running statistics, two `gpipe.param`s that the optimizer never
    touches, are updated once per mini-batch from all its micro-batches:
    running = (1 - momentum) running + momentum statistic, with the
    mini-batch's mean and unbiased variance. Evaluation normalises with the
    running statistics. A rematerialised forward does not update them again.

    ```mlir
    %y = gpipe.batch_norm %x, %gamma, %beta, %mean, %var {momentum = 0.1 : f64} : (tensor<8x14x14x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x14x14x16xf32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$input, GPipe_FloatTensor:$gamma,
                            GPipe_FloatTensor:$beta,
                            GPipe_FloatTensor:$running_mean,
                            GPipe_FloatTensor:$running_var,
                            DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon,
                            DefaultValuedAttr<F64Attr, "0.1">:$momentum),
                       CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma `,` $beta `,` $running_mean `,` $running_var attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_EmbeddingOp : GPipe_ComputeOp<"embedding"> {
  let summary = "looks up rows of a table by integer ids";
  let description = [{
    `ids` is [...], `table` [V, D]; the result is [..., D].

    ```mlir
    %e = gpipe.embedding %ids, %table : (tensor<8x16xi32>, tensor<96x64xf32>) -> tensor<8x16x64xf32>
    ```
  }];
  let arguments = !con((ins GPipe_IndexTensor:$ids, GPipe_FloatTensor:$table),
                       CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $table attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_AttentionOp : GPipe_ComputeOp<"attention",
                                         [AttrSizedOperandSegments]> {
  let summary = "multi-head self-attention with its projections";
  let description = [{
    `input` is [B, S, D]; `qkv_weight` [D, 3D] projects to queries, keys and
    values (columns q | k | v, head h owning columns h D/heads to
    (h + 1) D/heads of each); `out_weight` [D, D] projects the concatenated
    heads. `heads` must divide D. With `causal`, position i attends to
    positions <= i. The optional biases come together: `qkv_bias` [3D] is
    added to the projection x qkv_weight, `out_bias` [D] to the output
    projection (PyTorch's nn.MultiheadAttention with bias=True).

    ```mlir
    %y = gpipe.attention %x, %wqkv, %wo heads 4 causal : (tensor<8x16x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>) -> tensor<8x16x64xf32>
    %z = gpipe.attention %y, %wqkv, %wo bias %bqkv, %bo heads 4 : (tensor<8x16x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>, tensor<192xf32>, tensor<64xf32>) -> tensor<8x16x64xf32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$input,
                            GPipe_FloatTensor:$qkv_weight,
                            GPipe_FloatTensor:$out_weight,
                            Optional<GPipe_FloatTensor>:$qkv_bias,
                            Optional<GPipe_FloatTensor>:$out_bias,
                            PosI64:$heads, UnitAttr:$causal), CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $qkv_weight `,` $out_weight (`bias` $qkv_bias^ `,` $out_bias)?
    `heads` $heads (`causal` $causal^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_DropoutOp : GPipe_ComputeOp<"dropout", [AllTypesMatch<["input", "result"]>]> {
  let summary = "inverted dropout with a seeded mask";
  let description = [{
    Zeroes each element with probability `rate` and scales the others by
    1/(1-rate). The mask is a function of `seed`, the micro-batch and the
    element, so recomputation reproduces it.

    ```mlir
    %y = gpipe.dropout %x rate 0.1 seed 7 : tensor<32x256xf32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$input, F64Attr:$rate,
                            I64Attr:$seed), CostArg);
  let results = (outs GPipe_FloatTensor:$result);
  let assemblyFormat =
      "$input `rate` $rate `seed` $seed attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def GPipe_SoftmaxCrossEntropyOp : GPipe_ComputeOp<"softmax_cross_entropy"> {
  let summary = "mean softmax cross-entropy of logits against integer labels";
  let description = [{
    `logits` is [..., C]; `labels` [...] holds class indices in [0, C). The
    result is the mean over all label positions.

    ```mlir
    %l = gpipe.softmax_cross_entropy %logits, %y : (tensor<32x10xf32>, tensor<32xi32>) -> tensor<f32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$logits,
                            GPipe_IndexTensor:$labels), CostArg);
  let results = (outs GPipe_ScalarLoss:$result);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPipe_MseLossOp : GPipe_ComputeOp<"mse_loss"> {
  let summary = "mean squared error between predictions and targets";
  let description = [{
    ```mlir
    %l = gpipe.mse_loss %p, %t : (tensor<32x1xf32>, tensor<32x1xf32>) -> tensor<f32>
    ```
  }];
  let arguments = !con((ins GPipe_FloatTensor:$prediction,
                            GPipe_FloatTensor:$target), CostArg);
  let results = (outs GPipe_ScalarLoss:$result);
  let assemblyFormat = [{
    $prediction `,` $target attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Unrolled schedule: one straight-line program per device
//===----------------------------------------------------------------------===//

def GPipe_ScheduleOp : GPipe_Op<"schedule", [
    Symbol, NoTerminator, SingleBlock, IsolatedFromAbove]> {
  let summary = "the unrolled micro-batch schedule of a model";
  let description = [{
    Written by `gpipe-unroll-schedule`: one `gpipe.program` per device.
    `rows` gives the rows of each micro-batch (the first batch % M
    micro-batches get one row more). With `virtual_stages V` (interleaved
    schedules) each of the K programs runs V stages, round-robin: stage s on
    device s mod K; its loads and transfers then name the stage they serve
    (`stage s`).

    With `send_window N` sends complete in the background: each has a
    `gpipe.wait_send_activation` or `gpipe.wait_send_gradient` after it, up
    to which its value's buffer is kept, and no point of a program has more
    than N sends to one peer not yet waited for. Without it a send is done
    when it is issued, and programs have no waits.

    ```mlir
    gpipe.schedule @mlp_schedule model @mlp microbatches 2 rows [16, 16] {
      gpipe.program device 0 {
        gpipe.load_input "x" mb 0 rows 16
        gpipe.forward @stage0 mb 0 rows 16
        gpipe.send_activation to 1 mb 0 channel 0 : tensor<16x256xf32>
        ...
        gpipe.optimizer_step
      }
      ...
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, FlatSymbolRefAttr:$model,
                       PosI64:$microbatches, DenseI64ArrayAttr:$rows,
                       OptionalAttr<PosI64>:$virtual_stages,
                       OptionalAttr<PosI64>:$send_window);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `model` $model `microbatches` $microbatches `rows` $rows
    (`virtual_stages` $virtual_stages^)? (`send_window` $send_window^)?
    attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def GPipe_ProgramOp : GPipe_Op<"program", [
    NoTerminator, SingleBlock, HasParent<"ScheduleOp">]> {
  let summary = "the straight-line program of one device";
  let arguments = (ins NonNegI64:$device);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "`device` $device attr-dict-with-keyword $body";
}

class GPipe_InstrOp<string mnemonic, list<Trait> traits = []>
    : GPipe_Op<mnemonic, !listconcat([HasParent<"ProgramOp">], traits)>;

def GPipe_LoadInputOp : GPipe_InstrOp<"load_input"> {
  let summary = "loads one micro-batch of a model input";
  let arguments = (ins StrAttr:$name, NonNegI64:$mb, PosI64:$rows,
                       OptionalAttr<NonNegI64>:$stage);
  let assemblyFormat = "$name `mb` $mb `rows` $rows (`stage` $stage^)? attr-dict";
}

class GPipe_RunStageOp<string mnemonic, string text> : GPipe_InstrOp<mnemonic> {
  let summary = text;
  let arguments = (ins FlatSymbolRefAttr:$stage, NonNegI64:$mb, PosI64:$rows);
  let assemblyFormat = "$stage `mb` $mb `rows` $rows attr-dict";
}
def GPipe_ForwardOp : GPipe_RunStageOp<"forward",
    "runs a stage's forward on one micro-batch">;
def GPipe_BackwardOp : GPipe_RunStageOp<"backward",
    "runs a stage's backward on one micro-batch, accumulating its gradients">;
def GPipe_BackwardWeightsOp : GPipe_RunStageOp<"backward_weights",
    "runs the weight-gradient part (W) of a stage's split backward on one "
    "micro-batch, after its backward (B); zero-bubble schedules">;

class GPipe_TransferOp<string mnemonic, string peerWord, string text>
    : GPipe_InstrOp<mnemonic> {
  let summary = text;
  let arguments = (ins NonNegI64:$peer, NonNegI64:$mb, NonNegI64:$channel,
                       TypeAttrOf<AnyStaticShapeTensor>:$type,
                       OptionalAttr<NonNegI64>:$stage);
  // `stage`: the stage of this device the transfer serves, when devices
  // run several (interleaving); otherwise the device's one stage.
  let assemblyFormat = "`" # peerWord # "` $peer `mb` $mb `channel` $channel "
                       "(`stage` $stage^)? attr-dict `:` $type";
}
def GPipe_SendActivationOp : GPipe_TransferOp<"send_activation", "to",
    "sends a micro-batch's activation to the next device">;
def GPipe_RecvActivationOp : GPipe_TransferOp<"recv_activation", "from",
    "receives a micro-batch's activation from the previous device">;
def GPipe_SendGradientOp : GPipe_TransferOp<"send_gradient", "to",
    "sends a micro-batch's input gradient to the previous device">;
def GPipe_RecvGradientOp : GPipe_TransferOp<"recv_gradient", "from",
    "receives a micro-batch's output gradient from the next device">;

class GPipe_WaitSendOp<string mnemonic, string text>
    : GPipe_InstrOp<mnemonic> {
  let summary = text;
  let description = [{
    Waits until the peer has received the send of this device with the same
    peer, micro-batch, channel and stage; the sent value's buffer is kept
    until then. Placed by `gpipe-unroll-schedule` under a send window.
  }];
  let arguments = (ins NonNegI64:$peer, NonNegI64:$mb, NonNegI64:$channel,
                       OptionalAttr<NonNegI64>:$stage);
  let assemblyFormat = "`to` $peer `mb` $mb `channel` $channel "
                       "(`stage` $stage^)? attr-dict";
}
def GPipe_WaitSendActivationOp : GPipe_WaitSendOp<"wait_send_activation",
    "waits until the next device has received an activation sent to it">;
def GPipe_WaitSendGradientOp : GPipe_WaitSendOp<"wait_send_gradient",
    "waits until the previous device has received a gradient sent to it">;

def GPipe_OptimizerStepOp : GPipe_InstrOp<"optimizer_step"> {
  let summary = "applies the gradients accumulated over all micro-batches once";
  let assemblyFormat = "attr-dict";
}

#endif // GPIPE_OPS_TD
