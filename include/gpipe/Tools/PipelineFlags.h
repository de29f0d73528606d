//===- PipelineFlags.h - A tool's pipeline options --------------*- C++ -*-===//
//
// How gpipe-run and gpipe-bench compile a model and where they run it:
// --stages, --microbatches, --remat, --schedule, --batch-size, --device and
// the rest, spelt the same in both, in their own help category, plus the CPU
// devices' threads. The CPU tuning, the partition's finer choices and the
// rarely changed options are cl::Hidden, so that --help stays short and
// --help-hidden lists them. Header-only: it defines the options, so exactly
// one source file of a tool includes it.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TOOLS_PIPELINEFLAGS_H
#define GPIPE_TOOLS_PIPELINEFLAGS_H

#include "gpipe/Analysis/ScheduleKinds.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Support/OptionParsers.h"
#include "gpipe/Target/CompileToBundle.h"
#include "gpipe/runtime/exec/Engine.h"

#include "llvm/Support/CommandLine.h"

#include <optional>
#include <string>

namespace gpipe::tools {

static llvm::cl::OptionCategory pipelineCategory("Pipeline");
static gpipe::Count numStages("stages", llvm::cl::init(4),
                              llvm::cl::desc("pipeline stages K (devices)"),
                              llvm::cl::cat(pipelineCategory));
static gpipe::Count
    numMicrobatches("microbatches", llvm::cl::init(8),
                    llvm::cl::desc("micro-batches M per mini-batch"),
                    llvm::cl::cat(pipelineCategory));
static llvm::cl::opt<gpipe::RematPolicy> remat(
    "remat", llvm::cl::desc("rematerialisation policy"),
    llvm::cl::init(gpipe::RematPolicy::Full),
    llvm::cl::values(clEnumValN(gpipe::RematPolicy::None, "none",
                                "keep everything"),
                     clEnumValN(gpipe::RematPolicy::Full, "full",
                                "recompute each stage's forward (GPipe)"),
                     clEnumValN(gpipe::RematPolicy::ExceptLast, "except-last",
                                "recompute but for the last micro-batch"),
                     clEnumValN(gpipe::RematPolicy::Selective, "selective",
                                "keep the products' results (dense, "
                                "attention), recompute the rest")),
    llvm::cl::cat(pipelineCategory));
static llvm::cl::opt<gpipe::schedule::ScheduleKind> scheduleKind(
    "schedule",
    llvm::cl::desc("the order of forwards and backwards per device"),
    llvm::cl::init(gpipe::schedule::ScheduleKind::GPipe),
    llvm::cl::values(
        clEnumValN(gpipe::schedule::ScheduleKind::GPipe, "gpipe",
                   "fill, then drain (GPipe)"),
        clEnumValN(gpipe::schedule::ScheduleKind::OneFOneB, "1f1b",
                   "one forward, one backward: at most K "
                   "micro-batches in flight"),
        clEnumValN(gpipe::schedule::ScheduleKind::ZeroBubbleH1, "zb-h1",
                   "1F1B with split backwards (B, then W deferred into "
                   "the bubble): about a third of its bubble"),
        clEnumValN(gpipe::schedule::ScheduleKind::Interleaved, "interleaved",
                   "1F1B with --virtual-stages stages per device, "
                   "round-robin: the bubble shrinks by that factor")),
    llvm::cl::cat(pipelineCategory));
static gpipe::Count virtualStages(
    "virtual-stages", llvm::cl::init(1),
    llvm::cl::desc(
        "stages per device V (--schedule interleaved): the model is cut "
        "into --stages x V stages, stage s on device s mod --stages"),
    llvm::cl::cat(pipelineCategory));
static llvm::cl::opt<std::string> scheduleFile(
    "schedule-file", llvm::cl::init(""),
    llvm::cl::desc(
        "each device's order of forwards and backwards, one line per "
        "device ('device 0: F0 F1 B0 ...')"),
    llvm::cl::Hidden, llvm::cl::cat(pipelineCategory));
static gpipe::Count sendWindow(
    "send-window", llvm::cl::init(2),
    llvm::cl::desc(
        "sends complete in the background, at most this many in flight to "
        "each peer, each awaited where the compiler places its wait (0: a "
        "send is done when issued, copied or held until received)"),
    llvm::cl::Hidden, llvm::cl::cat(pipelineCategory));
static llvm::cl::opt<gpipe::PartitionObjective> objective(
    "objective", llvm::cl::desc("partition objective"),
    llvm::cl::init(gpipe::PartitionObjective::Variance),
    llvm::cl::values(clEnumValN(gpipe::PartitionObjective::Variance, "variance",
                                "even cell costs (GPipe)"),
                     clEnumValN(gpipe::PartitionObjective::Bottleneck,
                                "bottleneck", "smallest largest cell")),
    llvm::cl::Hidden, llvm::cl::cat(pipelineCategory));
static llvm::cl::opt<gpipe::PartitionBalance>
    balance("balance", llvm::cl::desc("what the partition balances"),
            llvm::cl::init(gpipe::PartitionBalance::Work),
            llvm::cl::values(
                clEnumValN(gpipe::PartitionBalance::Work, "work",
                           "each cell's compute times its device's forwards, "
                           "backwards and recomputes"),
                clEnumValN(gpipe::PartitionBalance::Compute, "compute",
                           "the layers' cost attributes alone")),
            llvm::cl::Hidden, llvm::cl::cat(pipelineCategory));
static llvm::cl::opt<bool> splitLayers(
    "split-layers", llvm::cl::init(true),
    llvm::cl::desc("cut layers with two products (a feed-forward block) into "
                   "finer layers before partitioning (=false: whole layers)"),
    llvm::cl::Hidden, llvm::cl::cat(pipelineCategory));
static llvm::cl::opt<gpipe::KernelCodegen> codegen(
    "codegen", llvm::cl::init(gpipe::KernelCodegen::Native),
    llvm::cl::desc("what runs the element-wise ops (default: native, but "
                   "none on --device cuda, where native also writes them "
                   "as PTX)"),
    llvm::cl::values(
        clEnumValN(gpipe::KernelCodegen::None, "none",
                   "the runtime's library kernels, one op at a time"),
        clEnumValN(gpipe::KernelCodegen::Native, "native",
                   "kernels the compiler generates for each run of "
                   "element-wise ops (CPU and host emulation; PTX on "
                   "--device cuda)")),
    llvm::cl::Hidden, llvm::cl::cat(pipelineCategory));
static llvm::cl::opt<std::string> precision(
    "precision", llvm::cl::init(""),
    llvm::cl::desc("f32, tf32 or bf16: the operands' precision in the "
                   "products (dense, matmul, convolution, attention), which "
                   "accumulate in f32 (default f32); --device cpu computes "
                   "them in f32"),
    llvm::cl::cat(pipelineCategory));
static gpipe::Whole<int64_t>
    batchSize("batch-size", llvm::cl::init(0),
              llvm::cl::desc("mini-batch size (0: the model's own)"),
              llvm::cl::cat(pipelineCategory));
static llvm::cl::opt<std::string>
    memoryCap("memory-cap", llvm::cl::init(""),
              llvm::cl::desc("per-device memory cap"),
              llvm::cl::cat(pipelineCategory));
static llvm::cl::opt<std::string> deviceName(
    "device", llvm::cl::init("cpu"),
    llvm::cl::desc("cpu, cuda (a GPU per stage, shared when there are "
                   "fewer) or host-emulation"),
    llvm::cl::cat(pipelineCategory));
static gpipe::Count timeoutMs(
    "timeout-ms", llvm::cl::init(60000),
    llvm::cl::desc("how long a step may wait for this process's devices"),
    llvm::cl::Hidden, llvm::cl::cat(pipelineCategory));

static Count cpuThreads(
    "threads-per-device", llvm::cl::init(0),
    llvm::cl::desc("cpu: threads per pipeline device (0: the cores divided "
                   "among the devices)"),
    llvm::cl::Hidden, llvm::cl::cat(pipelineCategory));
static llvm::cl::opt<bool> pinThreads(
    "pin-threads", llvm::cl::init(false),
    llvm::cl::desc("cpu: pin each device's threads to their own cores"),
    llvm::cl::Hidden, llvm::cl::cat(pipelineCategory));
static llvm::cl::opt<bool> packWeights(
    "pack-weights", llvm::cl::init(true),
    llvm::cl::desc("cpu: multiply by weights packed once per step where the "
                   "CPU has AVX-512 or AVX2 (=false: the BLAS for every "
                   "product)"),
    llvm::cl::Hidden, llvm::cl::cat(pipelineCategory));

/// Prints "TOOL: error: MESSAGE"; the exit status: 2 when the device is not
/// available here, else 1.
inline int reportError(const char *tool, const runtime::Status &status) {
  llvm::errs() << tool << ": error: " << status.message() << "\n";
  return status.code() == runtime::StatusCode::Unavailable ? 2 : 1;
}

/// The --device flag's kind; an InvalidArgument status naming the choices
/// for another name.
inline runtime::StatusOr<runtime::DeviceKind> deviceFromFlags() {
  if (std::optional<runtime::DeviceKind> kind =
          runtime::parseDeviceKind(deviceName))
    return *kind;
  return runtime::Status(runtime::StatusCode::InvalidArgument,
                         "unknown device '" + deviceName +
                             "': expected cpu, cuda or host-emulation");
}

/// The optimizer an --optimizer value names; an InvalidArgument status
/// naming the choices for another name.
inline runtime::StatusOr<runtime::OptimizerKind>
optimizerFromName(const std::string &name) {
  runtime::OptimizerKind kind;
  if (runtime::parseOptimizerKind(name, kind))
    return kind;
  return runtime::Status(
      runtime::StatusCode::InvalidArgument,
      "unknown optimizer '" + name +
          "': expected sgd, momentum, rmsprop, adam or adamw");
}

/// Sets the compile options the flags give (a plan file may override them).
inline void applyCompileFlags(CompilePipelineOptions &options) {
  options.batchSize = batchSize;
  options.numStages = numStages;
  options.numMicrobatches = numMicrobatches;
  options.objective = objective;
  options.balance = balance;
  options.splitLayers = splitLayers;
  options.memoryCap = memoryCap;
  options.remat = remat;
  options.schedule = scheduleKind;
  options.scheduleFile = scheduleFile;
  options.numVirtualStages = virtualStages;
  options.sendWindow = sendWindow;
  options.precision = precision;
  // CUDA keeps the library's kernels by default; --codegen native there
  // also writes the generated kernels as PTX (code.cuda), which the CUDA
  // backend loads and launches.
  options.codegen = deviceName == "cuda" && codegen.getNumOccurrences() == 0
                        ? KernelCodegen::None
                        : codegen.getValue();
  options.ptx = deviceName == "cuda" && options.codegen == KernelCodegen::Native;
}

/// The CPU devices' threads the flags ask for.
static llvm::cl::opt<bool> flushDenormals(
    "flush-denormals", llvm::cl::init(true),
    llvm::cl::desc("cpu: the devices' threads flush denormal floats to zero "
                   "(=false: IEEE gradual underflow, much slower on them)"),
    llvm::cl::Hidden, llvm::cl::cat(pipelineCategory));

static llvm::cl::opt<bool> decideOnDevices(
    "decide-on-devices", llvm::cl::init(true),
    llvm::cl::desc("cpu: clipping and the non-finite guard decide each step "
                   "on the devices (=false: on the host, after a mid-step "
                   "synchronize)"),
    llvm::cl::Hidden, llvm::cl::cat(pipelineCategory));

inline runtime::device::CpuThreading cpuThreadingFromFlags() {
  runtime::device::CpuThreading threading;
  threading.threadsPerDevice = cpuThreads;
  threading.pinThreads = pinThreads;
  threading.packWeights = packWeights;
  threading.flushDenormals = flushDenormals;
  threading.decideOnDevices = decideOnDevices;
  return threading;
}

} // namespace gpipe::tools

#endif // GPIPE_TOOLS_PIPELINEFLAGS_H
