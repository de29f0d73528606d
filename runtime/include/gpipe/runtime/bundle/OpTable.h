//===- OpTable.h - What every op of a stage program is ----------*- C++ -*-===//
//
// The facts of each op kind, expanded from Ops.def: its bundle name, operand
// and result counts, attributes and the flags the executors' rules depend on.
// Header-only and free of any dependency, so that the compiler's bundle
// emission reads the same table as the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_OPTABLE_H
#define GPIPE_RUNTIME_OPTABLE_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace gpipe::runtime {

enum class OpKind {
#define GPIPE_OP(Kind, ...) Kind,
#include "gpipe/runtime/bundle/Ops.def"
};

/// The op attributes beyond `op`, `operands` and `results`.
enum OpAttrs : unsigned {
  NoAttrs = 0,
  NameAttr = 1,       ///< name: the parameter (param, accumulate_grad)
  EpsilonAttr = 2,    ///< epsilon
  DropoutAttrs = 4,   ///< rate, seed
  AttentionAttrs = 8, ///< heads, causal
  ConvAttrs = 16,     ///< stride, padding, groups
  PoolAttrs = 32,     ///< window, stride, padding
  MomentumAttr = 64,  ///< momentum (batch norm's running statistics)
  KernelAttr = 128,   ///< kernel: the generated kernel's index (Bundle::code)
  MatmulAttrs = 256   ///< transpose_a, transpose_b (optional booleans)
};

/// The most inputs a generated kernel (the `kernel` op) takes: Ops.def's
/// maxOperands of `kernel`.
inline constexpr unsigned kMaxKernelInputs = 16;

/// The most iteration dimensions a generated kernel has (Bundle.h's
/// GeneratedKernelSpec::rank): the compiler merges the dimensions that every
/// operand has or lacks alike, so that a broadcast or reduction needs few.
inline constexpr unsigned kMaxKernelRank = 6;

enum OpFlag : unsigned {
  GradientOp = 1,           ///< belongs in a backward program
  DropsFirstResult = 2,     ///< result 0 (an input gradient) may be -1
  AccumulatesParam = 4,     ///< may write a parameter's gradient in place
  GradsOptionalOperands = 8 ///< each operand past minOperands adds a result
};

struct OpInfo {
  OpKind kind;
  const char *name;
  unsigned minOperands, maxOperands, results;
  unsigned attrs; ///< OpAttrs
  unsigned flags; ///< OpFlag
  /// The operand naming the forward result whose saved state this gradient
  /// op reads, or -1; `producer` is that forward op's kind.
  int stateOperand;
  OpKind producer;

  bool has(OpFlag flag) const { return (flags & flag) != 0; }
};

inline constexpr OpInfo kOpTable[] = {
#define GPIPE_OP(Kind, Name, MinOperands, MaxOperands, Results, Attrs, Flags,  \
                 StateOperand, Producer)                                       \
  {OpKind::Kind, Name,  MinOperands,  MaxOperands,      Results,               \
   Attrs,        Flags, StateOperand, OpKind::Producer},
#include "gpipe/runtime/bundle/Ops.def"
};

inline constexpr size_t kNumOpKinds = sizeof(kOpTable) / sizeof(kOpTable[0]);

inline const OpInfo &opInfo(OpKind kind) {
  return kOpTable[static_cast<size_t>(kind)];
}

/// The results of an op of `info`'s kind with `operands` operands (in
/// [minOperands, maxOperands]): `results`, plus one per optional operand
/// for GradsOptionalOperands (a biased attention_grad's dbqkv and dbo).
inline unsigned resultCountOf(const OpInfo &info, size_t operands) {
  if (!info.has(GradsOptionalOperands) || operands < info.minOperands)
    return info.results;
  return info.results + unsigned(operands - info.minOperands);
}

/// "dense", "layer_norm_grad", ...
inline const char *opKindName(OpKind kind) { return opInfo(kind).name; }

/// The kind named `name` in a bundle, or nothing.
inline std::optional<OpKind> opKindNamed(std::string_view name) {
  for (const OpInfo &info : kOpTable)
    if (name == info.name)
      return info.kind;
  return std::nullopt;
}

/// The buffers a forward op saves with its result for its gradient op, in
/// bytes, for a first operand of shape `shape` (`rank` dimensions): layer
/// norm's mean and rstd per row; attention's qkv, each query row's
/// log-sum-exp of its scores (the backward recomputes the probabilities from
/// it, as FlashAttention does: O(seq) per head, not O(seq^2)) and context;
/// dropout's mask (a byte per element); cross-entropy's softmax; batch
/// norm's mean and rstd per channel and its gradient's two column sums. The
/// compiler's memory plan and every executor size them here.
struct SavedState {
  unsigned count = 0;
  int64_t bytes[3] = {0, 0, 0};
  /// Whether the bytes scale with the rows (a micro-batch saves its share);
  /// batch norm's per-channel state does not.
  bool perRow = true;
  int64_t total() const { return bytes[0] + bytes[1] + bytes[2]; }
};

inline SavedState savedStateOf(OpKind kind, const int64_t *shape, size_t rank,
                               int64_t heads) {
  int64_t elements = 1;
  for (size_t i = 0; i < rank; ++i)
    elements *= shape[i];
  int64_t rows = rank == 0 ? 1 : elements / shape[rank - 1];
  SavedState state;
  switch (kind) {
  case OpKind::LayerNorm:
    state.count = 2;
    state.bytes[0] = state.bytes[1] = rows * 4;
    break;
  case OpKind::Attention: {
    if (rank != 3)
      break;
    int64_t b = shape[0], s = shape[1], d = shape[2];
    state.count = 3;
    state.bytes[0] = b * s * 3 * d * 4;
    state.bytes[1] = b * heads * s * 4;
    state.bytes[2] = b * s * d * 4;
    break;
  }
  case OpKind::Dropout:
    state.count = 1;
    state.bytes[0] = elements;
    break;
  case OpKind::SoftmaxCrossEntropy:
    state.count = 1;
    state.bytes[0] = elements * 4;
    break;
  case OpKind::BatchNorm: {
    const int64_t channels = rank == 0 ? 1 : shape[rank - 1];
    state.count = 3;
    state.bytes[0] = state.bytes[1] = channels * 4;
    state.bytes[2] = 2 * channels * 4;
    state.perRow = false;
    break;
  }
  default:
    break;
  }
  return state;
}

/// The attributes of a window over channels-last images: conv2d's (its
/// window is its weight's [KH, KW]) and the pools'.
struct WindowAttrs {
  int64_t window[2] = {1, 1}; ///< pools: [KH, KW]
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t groups = 1; ///< conv2d
};

/// Where a window slides: over input [batch, height, width, channels], with
/// output [batch, outHeight, outWidth, filters] (a pool's filters are its
/// channels). Every kernel, validation and memory plan of the windowed ops
/// reads it.
struct WindowGeometry {
  int64_t batch = 0, height = 0, width = 0, channels = 0;
  int64_t kernelH = 1, kernelW = 1, strideH = 1, strideW = 1;
  int64_t padH = 0, padW = 0, groups = 1, filters = 0;
  int64_t outHeight = 0, outWidth = 0;

  /// Output pixels: the rows of conv2d's GEMM.
  int64_t pixels() const { return batch * outHeight * outWidth; }
  /// A group's patch: the GEMM's inner dimension (KH x KW x C / groups).
  int64_t patch() const { return kernelH * kernelW * (channels / groups); }
  /// A 1x1 kernel with stride 1 and no padding reads the input as its own
  /// patch matrix, so conv2d needs no im2col.
  bool isPointwise() const {
    return kernelH == 1 && kernelW == 1 && strideH == 1 && strideW == 1 &&
           padH == 0 && padW == 0;
  }
  /// Elements of the patch matrix [pixels, groups, KH, KW, C / groups].
  int64_t patchElements() const {
    return isPointwise() ? 0 : pixels() * kernelH * kernelW * channels;
  }
};

/// The geometry of a window of `kernel` [KH, KW] over `input` (rank 4,
/// NHWC), producing `filters` channels; the output sizes are zero when the
/// window does not fit (the verifiers refuse that first).
inline WindowGeometry windowGeometryOf(const int64_t *input,
                                       const int64_t kernel[2],
                                       const WindowAttrs &attrs,
                                       int64_t filters) {
  WindowGeometry g;
  g.batch = input[0], g.height = input[1], g.width = input[2];
  g.channels = input[3];
  g.kernelH = kernel[0], g.kernelW = kernel[1];
  g.strideH = attrs.stride[0], g.strideW = attrs.stride[1];
  g.padH = attrs.padding[0], g.padW = attrs.padding[1];
  g.groups = attrs.groups, g.filters = filters;
  auto outOf = [](int64_t size, int64_t k, int64_t stride, int64_t pad) {
    int64_t padded = size + 2 * pad;
    return k > padded || stride < 1 ? 0 : (padded - k) / stride + 1;
  };
  g.outHeight = outOf(g.height, g.kernelH, g.strideH, g.padH);
  g.outWidth = outOf(g.width, g.kernelW, g.strideW, g.padW);
  return g;
}

/// A conv2d's geometry from its input and HWIO weight [KH, KW, C/G, F].
inline WindowGeometry convGeometryOf(const int64_t *input,
                                     const int64_t *weight,
                                     const WindowAttrs &attrs) {
  return windowGeometryOf(input, weight, attrs, weight[3]);
}

/// A pool's geometry from its input.
inline WindowGeometry poolGeometryOf(const int64_t *input,
                                     const WindowAttrs &attrs) {
  WindowAttrs single = attrs;
  single.groups = 1;
  return windowGeometryOf(input, attrs.window, single, input[3]);
}

/// Scratch bytes the kernel of `kind` needs while it runs, given its
/// operands' shapes (`operands[k]`, `ranks[k]` dimensions, `count` of
/// them) and attributes: attention_grad's workspace (4 x its x); conv2d's
/// and conv2d_grad's patch matrix (im2col of x, then conv2d_grad's patch
/// gradient in the same buffer).
inline int64_t scratchBytesOf(OpKind kind, const int64_t *const *operands,
                              const size_t *ranks, size_t count,
                              const WindowAttrs &attrs) {
  auto elements = [&](size_t k) {
    int64_t n = 1;
    for (size_t i = 0; i < ranks[k]; ++i)
      n *= operands[k][i];
    return n;
  };
  switch (kind) {
  case OpKind::AttentionGrad:
    return count > 2 ? 4 * elements(2) * 4 : 0;
  case OpKind::Conv2d:
  case OpKind::Conv2dGrad: {
    // conv2d: (x, w[, b]); conv2d_grad: (dy, x, w).
    size_t x = kind == OpKind::Conv2d ? 0 : 1;
    if (count < x + 2 || ranks[x] != 4 || ranks[x + 1] != 4)
      return 0;
    return 4 *
           convGeometryOf(operands[x], operands[x + 1], attrs).patchElements();
  }
  default:
    return 0;
  }
}

/// Pairs of consecutive forward ops that run as one kernel: the second
/// reads the first's result as its operand 0, and both results stay values
/// (the backward reads them), so fusing saves a pass over memory and a
/// launch, not a buffer. The compiler marks them (BundleEmitter), the
/// runtime runs them (DeviceOps.cpp, KernelApi's fused kernels).
enum class FusionKind {
  None,
  DenseActivation, ///< dense (bias) then relu, gelu, gelu_erf or tanh
  AddLayerNorm     ///< add (a residual) then layer_norm
};

/// The fusion of `first` followed by `second`, or None.
inline FusionKind fusionOf(OpKind first, OpKind second) {
  if (first == OpKind::Dense &&
      (second == OpKind::Relu || second == OpKind::Gelu ||
       second == OpKind::GeluErf || second == OpKind::Tanh))
    return FusionKind::DenseActivation;
  if (first == OpKind::Add && second == OpKind::LayerNorm)
    return FusionKind::AddLayerNorm;
  return FusionKind::None;
}

/// "dense_activation", "add_layer_norm": the bundle's names.
inline const char *fusionName(FusionKind kind) {
  switch (kind) {
  case FusionKind::DenseActivation:
    return "dense_activation";
  case FusionKind::AddLayerNorm:
    return "add_layer_norm";
  case FusionKind::None:
    break;
  }
  return "none";
}

inline std::optional<FusionKind> fusionNamed(std::string_view name) {
  for (FusionKind kind :
       {FusionKind::DenseActivation, FusionKind::AddLayerNorm})
    if (name == fusionName(kind))
      return kind;
  return std::nullopt;
}

/// The compiler's choice of fused pairs among the `n` ops of a forward, the
/// one rule for the bundle's marks and the memory plan's lifetimes: per op,
/// the fusion it starts with the next op that does work (params are views
/// and are skipped), or None. `kind(i)` is op i's kind (nullopt: unknown),
/// `operand0(i)` / `result0(i)` its first operand and result ids (-1: none).
/// The second op must read the first's result as its operand 0; pairs do
/// not chain. The plan keeps the first op's operands live through the
/// second, which the fused kernel still reads.
template <class KindOf, class IdOf, class ResultOf>
std::vector<FusionKind> chooseFusions(size_t n, KindOf kind, IdOf operand0,
                                      ResultOf result0) {
  constexpr size_t kNone = ~size_t(0);
  std::vector<FusionKind> fusions(n, FusionKind::None);
  size_t open = kNone; // the last op that may start a pair
  OpKind openKind = OpKind::Param;
  for (size_t i = 0; i < n; ++i) {
    std::optional<OpKind> current = kind(i);
    if (current == OpKind::Param)
      continue;
    if (open != kNone && current) {
      FusionKind fusion = fusionOf(openKind, *current);
      int64_t linked = result0(open);
      if (fusion != FusionKind::None && linked >= 0 && operand0(i) == linked) {
        fusions[open] = fusion;
        open = kNone;
        continue;
      }
    }
    open = current ? i : kNone;
    if (current)
      openKind = *current;
  }
  return fusions;
}

// The table is indexed by kind: each row must sit at its enumerator.
namespace detail {
constexpr bool opTableIsIndexedByKind() {
  for (size_t i = 0; i < kNumOpKinds; ++i)
    if (static_cast<size_t>(kOpTable[i].kind) != i)
      return false;
  return true;
}
} // namespace detail
static_assert(detail::opTableIsIndexedByKind(), "Ops.def rows out of order");
static_assert(kOpTable[size_t(OpKind::Kernel)].maxOperands == kMaxKernelInputs,
              "a kernel op takes up to kMaxKernelInputs operands");

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_OPTABLE_H
