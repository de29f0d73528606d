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
#include "gpipe/runtime/Ops.def"
};

/// The op attributes beyond `op`, `operands` and `results`.
enum OpAttrs : unsigned {
  NoAttrs = 0,
  NameAttr = 1,      ///< name: the parameter (param, accumulate_grad)
  EpsilonAttr = 2,   ///< epsilon
  DropoutAttrs = 4,  ///< rate, seed
  AttentionAttrs = 8 ///< heads, causal
};

enum OpFlag : unsigned {
  GradientOp = 1,       ///< belongs in a backward program
  DropsFirstResult = 2, ///< result 0 (an input gradient) may be -1
  AccumulatesParam = 4  ///< may write a parameter's gradient in place
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
#include "gpipe/runtime/Ops.def"
};

inline constexpr size_t kNumOpKinds = sizeof(kOpTable) / sizeof(kOpTable[0]);

inline const OpInfo &opInfo(OpKind kind) {
  return kOpTable[static_cast<size_t>(kind)];
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
/// norm's mean and rstd per row; attention's qkv, probabilities and context;
/// dropout's mask (a byte per element); cross-entropy's softmax. The compiler's
/// memory plan and every executor size them here.
struct SavedState {
  unsigned count = 0;
  int64_t bytes[3] = {0, 0, 0};
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
    state.bytes[1] = b * heads * s * s * 4;
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
  default:
    break;
  }
  return state;
}

/// Scratch bytes the kernel of `kind` needs while it runs, for an operand 2
/// (attention_grad's x) of `elements` elements.
inline int64_t scratchBytesOf(OpKind kind, int64_t operand2Elements) {
  return kind == OpKind::AttentionGrad ? 4 * operand2Elements * 4 : 0;
}

/// Pairs of consecutive forward ops that run as one kernel: the second
/// reads the first's result as its operand 0, and both results stay values
/// (the backward reads them), so fusing saves a pass over memory and a
/// launch, not a buffer. The compiler marks them (BundleEmitter), the
/// runtime runs them (DeviceOps.cpp, KernelApi's fused kernels).
enum class FusionKind {
  None,
  DenseActivation, ///< dense (bias) then relu, gelu or tanh
  AddLayerNorm     ///< add (a residual) then layer_norm
};

/// The fusion of `first` followed by `second`, or None.
inline FusionKind fusionOf(OpKind first, OpKind second) {
  if (first == OpKind::Dense &&
      (second == OpKind::Relu || second == OpKind::Gelu ||
       second == OpKind::Tanh))
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

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_OPTABLE_H
