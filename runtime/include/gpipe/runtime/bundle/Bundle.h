//===- Bundle.h - The compiled program the runtime executes -----*- C++ -*-===//
//
// A bundle is what the compiler hands the runtime: the parameters, one
// straight-line program per stage for the forward and one for the backward
// (already differentiated: the runtime does no autodiff), and one instruction
// stream per device (the unrolled GPipe schedule). This header is the
// in-memory form; gpipe-translate will write it as a documented text file and
// a loader will read it back.
//
// Values. Each stage numbers its values 0..N-1 (`StageProgram::values`).
// Shapes are at the full batch; a value whose `batched` flag is set has the
// batch as dimension 0 and runs at the micro-batch's row count. Parameter
// values are not batched. Losses are scalars.
//
// Rematerialisation. The backward program starts with `recompute` ops, copies
// of forward ops that define the SAME value ids again. Under remat `full` the
// device keeps only the stage inputs of each in-flight micro-batch and runs
// the recompute ops before the gradient ops; under `none` it keeps every
// forward value and skips them; under `except-last` it keeps the values of the
// last micro-batch only (the first to come back) and recomputes the others.
// Ops that save state for their backward (layer norm, attention, dropout,
// cross-entropy) keep it with the value they define, so a gradient op finds
// it through its `forward` operand.
//
// What the executor (Executor.h) checks in `validateBundle` and relies on:
//  - Every dimension is >= 1; a batched value has the batch as dimension 0.
//  - Forward ops use stage inputs and earlier forward results; recompute ops
//    use stage inputs and earlier recompute results and redefine forward ids
//    (same op kind). Under `full` and `except-last` the backward may use only
//    stage inputs, `outputGrads`, recompute results and its own earlier
//    results (so it runs on recomputed values); under `none` also forward
//    results. Backward results are fresh ids.
//  - The `forward` operand of TanhGrad, SoftmaxGrad, LayerNormGrad,
//    AttentionGrad, DropoutGrad and SoftmaxCrossEntropyGrad is the result of
//    the matching forward op kind (whose rate / heads / causal it repeats).
//  - Param and AccumulateGrad name a parameter of the same stage.
//  - Channels carry batched f32 values; stage s+1's channel c has the shape
//    of stage s's outputs[c], whichever devices run them. An output may be a
//    stage input (a skip value carried through this stage). Each channel has an
//    input gradient; use Zeros where none reaches it.
//  - The last stage has a loss (a forward loss op's result) and no outputs.
// Loss scaling: the loss-gradient ops of micro-batch m get scale rows_m / N.
// Dropout: element (row, col) of the mask is a function of (op seed, step,
// global row, col), where the global row counts all dimensions but the last
// over the whole batch (micro-batch row offset x rows per example + local
// row) and step is the training step from 1; evaluation has no dropout.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_BUNDLE_H
#define GPIPE_RUNTIME_BUNDLE_H

#include "gpipe/runtime/bundle/Initializers.h"
#include "gpipe/runtime/bundle/OpTable.h"
#include "gpipe/runtime/bundle/Precision.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpipe::runtime {

enum class ElementType { F32, I32 };

struct ValueSpec {
  std::vector<int64_t> shape; ///< full-batch shape
  ElementType type = ElementType::F32;
  bool batched = true; ///< dimension 0 is the batch
};

// OpKind and the facts of each op: OpTable.h (from Ops.def).

struct Op {
  OpKind kind = OpKind::Relu;
  std::vector<int> operands; ///< value ids
  /// Value ids. Result 0 (dx) of DenseGrad, LayerNormGrad and AttentionGrad
  /// may be -1 when no gradient of the input is needed.
  std::vector<int> results;
  std::string name;          ///< Param / AccumulateGrad: the parameter
  float epsilon = 1e-5f;     ///< LayerNorm(Grad), BatchNorm
  /// BatchNorm: running = (1 - momentum) running + momentum statistic.
  float momentum = 0.1f;
  float rate = 0.0f;         ///< Dropout(Grad)
  uint64_t seed = 0;         ///< Dropout(Grad)
  int64_t heads = 1;         ///< Attention(Grad)
  bool causal = false;       ///< Attention(Grad)
  /// Matmul: op(a) is a with its last two dimensions swapped (op(b) of b);
  /// written only when set.
  bool transposeA = false, transposeB = false;
  /// Conv2d(Grad): stride, padding, groups; the pools: window, stride,
  /// padding.
  WindowAttrs window;
  /// Forward and recompute ops: runs as one kernel with the next op (the
  /// compiler's choice, OpTable.h's fusionOf).
  FusionKind fusion = FusionKind::None;
  int kernel = -1; ///< Kernel: its index in Bundle::code.kernels
  /// Kernel: the iteration sizes at the full batch, one per dimension of the
  /// kernel (GeneratedKernelSpec::rank), each >= 1.
  std::vector<int64_t> space;
  /// Kernel: space[0] holds the batch dimension, so that a micro-batch of
  /// `rows` rows runs space[0] / batch * rows iterations of it.
  bool spaceBatched = false;
};

/// Where a stage input comes from.
struct StageInput {
  int value = -1;
  bool fromChannel = true; ///< else a model input, by `inputName`
  unsigned channel = 0;
  std::string inputName;
};

struct StageProgram {
  std::vector<ValueSpec> values;
  std::vector<StageInput> inputs;
  /// Non-last stages: value of channel c to the next stage is outputs[c].
  std::vector<int> outputs;
  int loss = -1; ///< last stage: the loss value
  std::vector<Op> forward;
  /// Copies of forward ops (same value ids), run before `backward` when the
  /// micro-batch's forward values were not kept.
  std::vector<Op> recompute;
  std::vector<Op> backward;
  /// Zero-bubble schedules split the backward: ops [0, weightsFrom) are B
  /// (what the input gradients need), run by Backward, and the rest are W
  /// (the parameter gradients), run by BackwardWeights; a program without
  /// BackwardWeights runs both in its Backward. BackwardSplit.h splits.
  static constexpr size_t kNotSplit = ~size_t(0);
  size_t weightsFrom = kNotSplit;
  /// Where B ends: weightsFrom, or the whole backward when not split.
  size_t inputGradientEnd() const {
    return weightsFrom < backward.size() ? weightsFrom : backward.size();
  }
  /// Non-last stages: value ids bound to the received gradients of outputs.
  std::vector<int> outputGrads;
  /// Stages > 0: gradient of channel c sent back is inputGrads[c].
  std::vector<int> inputGrads;
};

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  InitKind init = InitKind::Zeros;
  double scale = 1.0;
  unsigned stage = 0;
  /// A constant of the model (a mask, a position table): no optimizer step
  /// changes it.
  bool frozen = false;
  /// A copy of the earlier parameter of this name (tied weights): it starts
  /// from its values, and before each update the gradients of the group are
  /// summed into each copy, so that they take the same update.
  std::string tied;
};

struct ModelInputSpec {
  std::string name;
  std::vector<int64_t> shape; ///< full batch
  ElementType type = ElementType::F32;
};

enum class InstrKind {
  LoadInput,
  Forward,
  Backward,
  SendActivation,
  RecvActivation,
  SendGradient,
  RecvGradient,
  OptimizerStep,
  BackwardWeights, ///< W of a split backward (StageProgram::weightsFrom)
  /// Under a send window (Bundle::sendWindow): waits until the peer has
  /// received this device's send of the same stage, micro-batch and channel.
  WaitSendActivation,
  WaitSendGradient,
};

/// K devices (one program each) run the stages round-robin: stage s on
/// device s mod K, so device d runs stage d and, under interleaved schedules
/// (K programs for K * V stages), stages d + K, d + 2K, ... Its program holds,
/// for each of its stages, exactly one Forward and one Backward per
/// micro-batch (the Forward first), and either no BackwardWeights or one per
/// micro-batch after its Backward, and ends with its only OptimizerStep, which
/// is a barrier: all devices update together, or none does when the step
/// fails. Activations of stage s go to the device of stage s + 1, gradients
/// to that of s - 1, and receives come from there. Under `except-last` the
/// micro-batch whose Forward of a stage comes last in the program keeps that
/// stage's values.
struct Instr {
  InstrKind kind = InstrKind::Forward;
  /// All but OptimizerStep: the stage the instruction serves, one of the
  /// device's: the one a load or receive feeds, whose output a send carries,
  /// or that a Forward/Backward runs.
  unsigned stage = 0;
  unsigned microbatch = 0;
  unsigned peer = 0;
  unsigned channel = 0;
  std::string inputName;
};

/// What a stage's forward keeps for its backward beyond the values every
/// policy keeps (KeptForwardValues.h).
enum class RematPolicy {
  None,       ///< everything: the backward reads the forward's values
  Full,       ///< the stage's inputs: the recompute rebuilds the rest
  ExceptLast, ///< as Full, but the micro-batch forwarded last keeps all
  /// The values the stage's recompute reads without rebuilding them (the
  /// products the compiler chose to keep): the recompute rebuilds the rest.
  Selective,
};

/// What the compiler's memory plan (gpipe-plan-memory) predicts for one
/// device, for an optimizer with `MemoryPlan::optimizerSlots` state tensors
/// per parameter.
/// A buffer of the compiler's placement: `bytes` at `offset` in the arena
/// (after the resident block), live from event `start` up to `end`, defined
/// by instruction `instr` of its device's program. It holds value `value` of
/// micro-batch `microbatch`; microbatch -1 marks the copy a send holds
/// (`value` >= 0) or an op's scratch (`value` -1). A device's buffers are
/// listed in the order its program defines them.
/// Every placed buffer's size and offset is a multiple of this many bytes (the
/// compiler's gpipe::kBufferGranule): a GPU's tensor-core GEMMs and vector
/// loads need 16-byte aligned operands.
constexpr int64_t kPlacedBufferGranule = 16;

struct PlacedBuffer {
  int64_t bytes = 0, offset = 0, start = 0, end = 0;
  int64_t instr = 0, microbatch = -1, value = -1;

  bool isScratch() const { return microbatch < 0 && value < 0; }
  bool holdsValue() const { return microbatch >= 0 && value >= 0; }
};

struct PlannedDeviceMemory {
  int64_t residentBytes = 0; ///< parameters, gradients, optimizer slots
  int64_t peakBytes = 0;     ///< the high-water mark of live bytes
  int64_t arenaBytes = 0;    ///< the static arena (>= peakBytes)
  /// Every buffer, when the compiler wrote its placement (empty: none).
  std::vector<PlacedBuffer> buffers;
};

struct MemoryPlan {
  unsigned optimizerSlots = 0;
  std::vector<PlannedDeviceMemory> devices; ///< empty: no plan
};

/// Generated code (docs/BundleFormat.md, "Generated kernels"): the kernels
/// the compiler fused and compiled to native code, which `kernel` ops run.
/// The runtime interprets none of it: it loads the variant this CPU runs
/// (backends/GeneratedCode.h) and calls each kernel's entry,
///   extern "C" void <symbol>(void **args),
/// with `inputs` + 1 pointers to memref descriptors (MLIR's
/// StridedMemRefType<float, r>, or <int32_t, r> for an i32 memref: the same
/// layout): the inputs, then the output (kernels/GeneratedCall.h).
///
/// A kernel iterates over `rank` dimensions (the op's `space` gives their
/// sizes). Input k has the dimensions inputDims[k] and the output those of
/// outputDims, each list strictly ascending: an input that lacks a
/// dimension is broadcast along it, and a dimension the output lacks is
/// reduced (summed or maxed) inside the kernel. An element-wise kernel's
/// output has every dimension.
///
/// A memref's own size along its dimension i is the space's at that
/// dimension, unless `extents` fixes it: a slice reads a window of its
/// input, a slice's gradient writes a window of its output (and 0 in the
/// rest of it), a concat's inputs each cover a part of the output. The
/// windows' offsets and steps are in the kernel's code; the runtime only
/// needs each memref's own sizes.
///
/// Each memref's elements are f32, unless `types` says i32 (an integer, or a
/// boolean stored as an i32 word, 0 or 1: comparisons, casts, `where`'s
/// mask). Every element is 4 bytes either way: the runtime passes the bytes
/// through and never reads them as floats.
struct GeneratedKernelSpec {
  std::string symbol;  ///< the entry's name in every variant
  unsigned inputs = 1; ///< 1 to kMaxKernelInputs (OpTable.h)
  /// What it computes ("add(in0,in1)->t0; relu(t0)->out"): for messages
  /// only, never interpreted.
  std::string ops;
  unsigned rank = 1; ///< 1 to kMaxKernelRank (OpTable.h)
  /// Per input: the iteration dimensions it has, in its own order (distinct,
  /// in [0, rank); a transposed input's are not ascending).
  std::vector<std::vector<unsigned>> inputDims;
  /// The output's dimensions, ascending, in [0, rank): the others are
  /// reduced, and each of those is some input's.
  std::vector<unsigned> outputDims;
  /// Empty (every memref has the space's sizes at its dimensions), or
  /// inputs + 1 lists, the inputs' in order and then the output's: list m
  /// has one entry per dimension of memref m (as many as inputDims[m], or
  /// outputDims), each -1 (the space's size at that dimension) or a fixed
  /// size >= 1. Never on iteration dimension 0 (which a batched space
  /// scales to a micro-batch's rows), nor on the output of a kernel that
  /// reduces.
  std::vector<std::vector<int64_t>> extents;
  /// Empty (every memref is f32), or inputs + 1 element types, the inputs'
  /// in order and then the output's.
  std::vector<ElementType> types;
  /// Empty, or one entry per input: 0, or n >= 1 for i32 indices into an
  /// axis of n elements, valid in [-n, n) (a gather's). The executor checks
  /// indices that come from the batch before it issues anything.
  std::vector<int64_t> indexBounds;

  /// Whether some dimension is reduced (the output lacks it).
  bool reduces() const { return outputDims.size() < rank; }
  /// Memref `memref`'s element type (input `memref`, or the output at
  /// memref `inputs`): its entry in `types`, or f32.
  ElementType typeOf(size_t memref) const {
    return types.empty() ? ElementType::F32 : types[memref];
  }
};

/// "" when `kernel`'s rank, dimensions, extents and types (their count) are
/// as GeneratedKernelSpec says, else what was expected and found ("expected
/// 'inputDims[1]' as distinct dimensions in [0, 2), found [1, 1]"), naming
/// the fields as the bundle file does (BundleCodeReader.cpp).
std::string checkKernelDims(const GeneratedKernelSpec &kernel);

/// The x86-64 levels a CPU variant is built for, narrowest first: the
/// psABI's baseline (SSE2), v3 (AVX2, FMA, BMI2, F16C, MOVBE, LZCNT) and v4
/// (v3 and AVX-512 F/BW/CD/DQ/VL).
inline constexpr const char *kCpuCodeIsas[] = {"x86-64", "x86-64-v3",
                                               "x86-64-v4"};

/// Every kernel, built for one x86-64 level: an ELF shared object.
struct CodeVariant {
  std::string isa;   ///< one of kCpuCodeIsas
  std::string bytes; ///< the shared object (decoded from the bundle's base64)
};

/// Every kernel as PTX for CUDA (the compiler's --gpipe-ptx): one module
/// with an `.entry <symbol>` per kernel, the ABI of
/// include/gpipe/Target/PtxKernels.h. The CUDA backend loads it with the
/// driver API (cuModuleLoadData) on each of its GPUs.
struct CudaCode {
  std::string arch; ///< the GPU it targets, "sm_90": sm_ and digits
  std::string ptx;  ///< the module's text
};

struct GeneratedCode {
  std::vector<GeneratedKernelSpec> kernels;
  std::vector<CodeVariant> cpu; ///< at least one when there are kernels
  /// The kernels as PTX (code.cuda); absent: the bundle cannot run its
  /// kernels on CUDA.
  std::optional<CudaCode> cuda;
  bool empty() const { return kernels.empty() && cpu.empty() && !cuda; }
};

/// Whether `arch` names a GPU as code.cuda's `arch` does: "sm_" then digits.
bool isCudaArch(const std::string &arch);

/// Whether the PTX text declares `.entry <symbol>` (a kernel of that name).
bool ptxHasEntry(const std::string &ptx, const std::string &symbol);

/// "" when `cuda` can hold `kernels`: its arch is sm_<digits>, its PTX is
/// not empty and declares `.entry <symbol>` for every kernel; else what was
/// expected and found, naming the fields as the bundle file does
/// ("expected 'ptx' with an '.entry gpipe_kernel_0_…' for kernel 0 (...),
/// found none").
std::string checkCudaCode(const CudaCode &cuda,
                          const std::vector<GeneratedKernelSpec> &kernels);

struct Bundle {
  std::string model;
  int64_t batch = 0;
  std::vector<int64_t> microbatchRows; ///< size M
  RematPolicy remat = RematPolicy::Full;
  std::vector<ModelInputSpec> inputs;
  std::vector<ParamSpec> params;
  /// The safetensors file holding the values of the Pretrained parameters,
  /// by name ("" when none is pretrained). loadBundle resolves a relative path
  /// against the bundle file's directory; otherwise it is used as written.
  std::string weights;
  std::vector<StageProgram> stages;         ///< stage s runs on device s mod K
  std::vector<std::vector<Instr>> programs; ///< per device: K of them
  /// How sends complete.
  ///  - 0: when issued; the memory plan may reuse a sent value's buffer at
  ///    once, so the transport copies it or holds the sender until the peer
  ///    receives it. Programs have no waits.
  ///  - N >= 1: a send posts the value's own buffer and the device goes on;
  ///    the plan keeps the buffer until the WaitSend the compiler placed
  ///    after it, before the optimizer step. At most N sends to one peer are
  ///    in flight (posted, not yet waited for) at any point of a program.
  unsigned sendWindow = 0;
  /// The compiler's precision for the products' operands (Precision.h);
  /// none: the backend's own (f32 unless its options say otherwise).
  std::optional<Precision> precision;
  MemoryPlan memoryPlan; ///< every buffer's place: the runtime plans nothing
  /// The generated kernels and their native code (empty: none). Loading it
  /// runs the bundle's code: a bundle is as trusted as an executable.
  GeneratedCode code;

  unsigned numDevices() const { return unsigned(programs.size()); }
  /// Stages per device: 1, or V under interleaving.
  unsigned stagesPerDevice() const {
    return programs.empty() ? 0 : unsigned(stages.size() / programs.size());
  }
  unsigned deviceOfStage(unsigned stage) const {
    return programs.empty() ? 0 : stage % unsigned(programs.size());
  }
  /// Which of its device's stages `stage` is (0 for stage d).
  unsigned localStage(unsigned stage) const {
    return programs.empty() ? 0 : stage / unsigned(programs.size());
  }
};

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_BUNDLE_H
