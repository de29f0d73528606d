//===- CudaBackend.cu - The device executor's backend on NVIDIA GPUs ------===//

#include "gpipe/cuda/CudaBackend.h"

#include "Bf16ParameterCopies.h"
#include "CudaDriverApi.h"
#include "GridKernels.cuh"

#include "gpipe/cuda/CudaDevices.h"
#include "gpipe/runtime/kernels/KernelsByFunctor.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <type_traits>
#include <vector>

using namespace gpipe::cuda;
using gpipe::runtime::device::DeviceBackend;
using gpipe::runtime::CudaCode;
using gpipe::runtime::GeneratedCode;
using gpipe::runtime::GeneratedKernelSpec;
using gpipe::runtime::device::EventId;
using gpipe::runtime::device::GemmBatch;
using gpipe::runtime::device::GeneratedCall;
using gpipe::runtime::device::KernelsByFunctor;
using gpipe::runtime::device::StreamId;

namespace {

class CudaBackend final : public KernelsByFunctor<CudaBackend, DeviceBackend> {
public:
  CudaBackend(CudaBackendOptions options, std::vector<GpuInfo> gpus,
              std::vector<int> gpuOf)
      : options(options), gpus(std::move(gpus)), gpuOf(std::move(gpuOf)) {}
  ~CudaBackend() override;

  /// Streams, cuBLAS handles and peer access; "" or the first failure.
  std::string init();

  template <class F> void forEach(StreamId s, int64_t n, const F &f) {
    if (n <= 0)
      return;
    const int threads = 256;
    const int64_t wanted = (n + threads - 1) / threads;
    const int64_t blocks =
        std::min<int64_t>(wanted, int64_t(sms(s)) * 16); // grid-stride beyond
    if (!setDevice(s))
      return;
    forEachKernel<<<unsigned(blocks), threads, 0, streams[s]>>>(f, n);
    note(cudaGetLastError(), "a kernel launch", s);
  }

  template <class F> void forEachRow(StreamId s, int64_t rows, const F &f) {
    if (rows <= 0)
      return;
    const int threads = 256; // 8 rows per block
    const int64_t rowsPerBlock =
        threads / gpipe::runtime::device::kernels::kRowLanes;
    const int64_t wanted = (rows + rowsPerBlock - 1) / rowsPerBlock;
    const int64_t blocks = std::min<int64_t>(wanted, int64_t(sms(s)) * 16);
    if (!setDevice(s))
      return;
    forEachRowKernel<<<unsigned(blocks), threads, 0, streams[s]>>>(f, rows);
    note(cudaGetLastError(), "a row kernel launch", s);
  }

  template <class F> void forEachColumn(StreamId s, int64_t cols, const F &f) {
    using gpipe::runtime::device::kernels::kColumnLanes;
    using gpipe::runtime::device::kernels::kColumnTile;
    if (cols <= 0)
      return;
    const int64_t wanted = (cols + kColumnTile - 1) / kColumnTile;
    const int64_t blocks = std::min<int64_t>(wanted, int64_t(sms(s)) * 2);
    if (!setDevice(s))
      return;
    forEachColumnKernel<<<unsigned(blocks), dim3(kColumnTile, kColumnLanes), 0,
                          streams[s]>>>(f, cols);
    note(cudaGetLastError(), "a column kernel launch", s);
  }

  std::string describe() const override;
  unsigned numDevices() const override { return options.numDevices; }
  std::string allocate(unsigned device, int64_t bytes, void **pointer) override;
  std::string allocateStaging(int64_t bytes, void **pointer) override;
  StreamId computeStream(unsigned device) override { return 2 * device; }
  StreamId copyStream(unsigned device) override { return 2 * device + 1; }
  EventId recordEvent(StreamId stream) override;
  void waitEvent(StreamId stream, EventId event) override;
  void copyToDevice(StreamId s, void *dst, const void *hostSrc,
                    int64_t bytes) override;
  void copyToHost(StreamId s, void *hostDst, const void *src,
                  int64_t bytes) override;
  void copyBetweenDevices(StreamId s, void *dst, unsigned dstDevice,
                          const void *src, unsigned srcDevice,
                          int64_t bytes) override;
  void fillZero(StreamId s, void *dst, int64_t bytes) override;
  void recordTime(StreamId s, double *slot) override;
  void gemm(StreamId stream, const GemmBatch &call) override;
  /// The bundle's generated kernels as PTX (code.cuda), loaded on every GPU
  /// a pipeline device runs on; the CPU's variants are never run here.
  std::string loadGeneratedKernels(const GeneratedCode &code) override;
  /// The parameters' bf16 copies on `device` (BF16 GEMMs).
  int64_t workspaceBytes(unsigned device) const override {
    return bf16Params.bytesOn(device);
  }
  /// The bundle's precision replaces the options' for every GEMM.
  std::string usePrecision(gpipe::runtime::Precision precision) override {
    using gpipe::runtime::Precision;
    options.precision = precision == Precision::BF16   ? GemmPrecision::BF16
                        : precision == Precision::TF32 ? GemmPrecision::TF32
                                                       : GemmPrecision::F32;
    return {};
  }
  /// One launch of the call's kernel (PtxKernels.h's ABI) on its stream.
  void generated(StreamId s, const GeneratedCall &call) override;
  std::string synchronize(std::chrono::milliseconds timeout) override;
  void *nativeStream(StreamId s) override {
    return s < streams.size() ? static_cast<void *>(streams[s]) : nullptr;
  }
  int nativeDevice(unsigned device) const override {
    return device < gpuOf.size() ? gpuOf[device] : -1;
  }
  std::string error() const override { return firstError; }

private:
  int gpuOfStream(StreamId s) const { return gpuOf[s / 2]; }
  int sms(StreamId s) const {
    return std::max(1, gpus[gpuOfStream(s)].multiProcessors);
  }
  std::string streamName(StreamId s) const {
    return "device " + std::to_string(s / 2) + "'s " +
           (s % 2 ? "copy" : "compute") + " stream (GPU " +
           std::to_string(gpuOfStream(s)) + ")";
  }
  bool setDevice(StreamId s) {
    return note(cudaSetDevice(gpuOfStream(s)), "cudaSetDevice", s);
  }
  /// Keeps the first error; true when `err` is success.
  bool note(cudaError_t err, const char *what, StreamId s) {
    if (err == cudaSuccess)
      return true;
    if (firstError.empty())
      firstError = std::string("CUDA error in ") + what + " on " +
                   streamName(s) + ": " + cudaErrorText(int(err));
    return false;
  }
  /// Keeps the first driver API error; true when `err` is success.
  bool noteDriver(CUresult err, const char *what, StreamId s) {
    if (err == CUDA_SUCCESS)
      return true;
    if (firstError.empty())
      firstError = std::string("CUDA driver error in ") + what + " on " +
                   streamName(s) + ": " + driverErrorText(err);
    return false;
  }
  std::string driverErrorText(CUresult err) const {
    const char *name = nullptr, *text = nullptr;
    if (driver.getErrorName)
      (void)driver.getErrorName(err, &name);
    if (driver.getErrorString)
      (void)driver.getErrorString(err, &text);
    return std::string(name ? name : "CUDA_ERROR_UNKNOWN") + " (" +
           std::to_string(int(err)) + "): " + (text ? text : "unknown error");
  }
  /// Loads `cuda`'s PTX on GPU `gpu` (its primary context: the runtime
  /// API's) and finds every kernel; "" or why not.
  std::string loadModule(int gpu, const CudaCode &cuda,
                         const std::vector<GeneratedKernelSpec> &kernels);
  void noteStatus(const CudaStatus &status, StreamId s) {
    if (!status.ok && firstError.empty())
      firstError = status.message + " (on " + streamName(s) + ")";
  }

  CudaBackendOptions options;
  std::vector<GpuInfo> gpus;
  std::vector<int> gpuOf; ///< per pipeline device
  std::vector<cudaStream_t> streams;
  std::vector<std::unique_ptr<CublasGemm>> blas; ///< per pipeline device
  std::vector<void *> allocations;
  std::vector<void *> stagingBlocks; ///< page-locked host memory
  /// BF16: each parameter's bf16 copy, converted once per step.
  detail::Bf16ParameterCopies bf16Params;
  /// `g.b`'s bf16 copy, converted on `s` if not yet this step; null where
  /// it cannot be made (the GEMM then converts B itself).
  const void *bf16CopyOf(StreamId s, const GemmBatch &g);
  /// Events recorded since the last synchronize, and the free ones, per GPU.
  std::vector<cudaEvent_t> events;
  std::vector<int> eventGpu;
  std::vector<std::vector<cudaEvent_t>> spareEvents;
  /// The generated kernels' module per GPU (null: not loaded there), and
  /// their functions in the order of the bundle's code.kernels.
  std::vector<CUmodule> modules;
  std::vector<std::vector<CUfunction>> functions;
  /// The kernels' specs (for messages), and their parameter counts.
  std::vector<GeneratedKernelSpec> kernelSpecs;
  DriverApi driver; ///< loaded with the kernels
  std::string firstError;
};

CudaBackend::~CudaBackend() {
  for (size_t s = 0; s < streams.size(); ++s) {
    if (!streams[s])
      continue;
    (void)cudaSetDevice(gpuOfStream(StreamId(s)));
    (void)cudaStreamSynchronize(streams[s]);
  }
  blas.clear();
  for (cudaEvent_t event : events)
    (void)cudaEventDestroy(event);
  for (auto &spare : spareEvents)
    for (cudaEvent_t event : spare)
      (void)cudaEventDestroy(event);
  for (size_t g = 0; g < modules.size(); ++g)
    if (modules[g]) {
      (void)cudaSetDevice(int(g));
      (void)driver.moduleUnload(modules[g]);
    }
  for (void *p : allocations)
    (void)cudaFree(p);
  for (void *p : stagingBlocks)
    (void)cudaFreeHost(p);
  for (size_t s = 0; s < streams.size(); ++s)
    if (streams[s]) {
      (void)cudaSetDevice(gpuOfStream(StreamId(s)));
      (void)cudaStreamDestroy(streams[s]);
    }
}

std::string CudaBackend::init() {
  streams.assign(2 * options.numDevices, nullptr);
  spareEvents.resize(gpus.size());
  for (StreamId s = 0; s < streams.size(); ++s) {
    if (!setDevice(s) ||
        !note(cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking),
              "cudaStreamCreateWithFlags", s))
      return firstError;
  }
  for (unsigned d = 0; d < options.numDevices; ++d) {
    blas.push_back(std::make_unique<CublasGemm>());
    CudaStatus status = blas.back()->init(gpuOf[d], streams[computeStream(d)]);
    if (!status.ok)
      return "device " + std::to_string(d) + ": " + status.message;
  }
  // Peer access between the GPUs that neighbouring devices run on.
  for (unsigned d = 0; d + 1 < options.numDevices; ++d) {
    int a = gpuOf[d], b = gpuOf[d + 1];
    if (a == b)
      continue;
    for (auto [from, to] : {std::pair<int, int>{a, b}, {b, a}}) {
      int can = 0;
      if (cudaDeviceCanAccessPeer(&can, from, to) != cudaSuccess || !can)
        continue; // cudaMemcpyPeerAsync still works, staged through the host
      (void)cudaSetDevice(from);
      cudaError_t err = cudaDeviceEnablePeerAccess(to, 0);
      if (err == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();
      else if (!note(err, "cudaDeviceEnablePeerAccess", computeStream(d)))
        return firstError;
    }
  }
  return {};
}

std::string CudaBackend::describe() const {
  std::string text;
  for (unsigned d = 0; d < options.numDevices; ++d)
    text += (d ? ", " : "") + std::string("device ") + std::to_string(d) +
            " on GPU " + std::to_string(gpuOf[d]);
  return gpus[0].name + " (" + std::to_string(gpus.size()) + " GPU" +
         (gpus.size() == 1 ? "" : "s") + "; " + text + "; GEMMs " +
         gemmPrecisionName(options.precision) + ")";
}

std::string CudaBackend::allocate(unsigned device, int64_t bytes,
                                  void **pointer) {
  *pointer = nullptr;
  if (device >= options.numDevices)
    return "allocate: no device " + std::to_string(device);
  if (bytes <= 0)
    return {};
  cudaError_t err = cudaSetDevice(gpuOf[device]);
  if (err == cudaSuccess)
    err = cudaMalloc(pointer, size_t(bytes));
  if (err != cudaSuccess) {
    *pointer = nullptr;
    (void)cudaGetLastError();
    return "device " + std::to_string(device) + " (GPU " +
           std::to_string(gpuOf[device]) + "): cudaMalloc of " +
           std::to_string(bytes) + " bytes failed: " + cudaErrorText(int(err));
  }
  allocations.push_back(*pointer);
  return {};
}

std::string CudaBackend::allocateStaging(int64_t bytes, void **pointer) {
  *pointer = nullptr;
  if (bytes <= 0)
    return {};
  // Portable: page-locked for every GPU's copies, not only the current one's.
  cudaError_t err =
      cudaHostAlloc(pointer, size_t(bytes), cudaHostAllocPortable);
  if (err != cudaSuccess) {
    *pointer = nullptr;
    (void)cudaGetLastError();
    return "cudaHostAlloc of " + std::to_string(bytes) +
           " bytes of page-locked staging memory failed: " +
           cudaErrorText(int(err));
  }
  stagingBlocks.push_back(*pointer);
  return {};
}

EventId CudaBackend::recordEvent(StreamId s) {
  const int gpu = gpuOfStream(s);
  cudaEvent_t event = nullptr;
  if (!spareEvents[gpu].empty()) {
    event = spareEvents[gpu].back();
    spareEvents[gpu].pop_back();
  } else if (setDevice(s)) {
    note(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
         "cudaEventCreateWithFlags", s);
  }
  EventId id = EventId(events.size());
  events.push_back(event);
  eventGpu.push_back(gpu);
  if (event && setDevice(s))
    note(cudaEventRecord(event, streams[s]), "cudaEventRecord", s);
  return id;
}

void CudaBackend::waitEvent(StreamId s, EventId event) {
  if (event >= events.size() || !events[event]) {
    if (firstError.empty())
      firstError = streamName(s) + " waits for event " +
                   std::to_string(event) + ", which was never recorded";
    return;
  }
  if (setDevice(s))
    note(cudaStreamWaitEvent(streams[s], events[event], 0),
         "cudaStreamWaitEvent", s);
}

void CudaBackend::copyToDevice(StreamId s, void *dst, const void *hostSrc,
                               int64_t bytes) {
  if (bytes > 0 && setDevice(s))
    note(cudaMemcpyAsync(dst, hostSrc, size_t(bytes), cudaMemcpyHostToDevice,
                         streams[s]),
         "cudaMemcpyAsync (host to device)", s);
}

void CudaBackend::copyToHost(StreamId s, void *hostDst, const void *src,
                             int64_t bytes) {
  if (bytes > 0 && setDevice(s))
    note(cudaMemcpyAsync(hostDst, src, size_t(bytes), cudaMemcpyDeviceToHost,
                         streams[s]),
         "cudaMemcpyAsync (device to host)", s);
}

void CudaBackend::copyBetweenDevices(StreamId s, void *dst,
                                     unsigned dstDevice, const void *src,
                                     unsigned srcDevice, int64_t bytes) {
  if (bytes <= 0 || !setDevice(s))
    return;
  int to = gpuOf[dstDevice], from = gpuOf[srcDevice];
  if (to == from)
    note(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToDevice,
                         streams[s]),
         "cudaMemcpyAsync (device to device)", s);
  else
    note(cudaMemcpyPeerAsync(dst, to, src, from, size_t(bytes), streams[s]),
         "cudaMemcpyPeerAsync", s);
}

void CudaBackend::fillZero(StreamId s, void *dst, int64_t bytes) {
  if (bytes > 0 && setDevice(s))
    note(cudaMemsetAsync(dst, 0, size_t(bytes), streams[s]), "cudaMemsetAsync",
         s);
}

/// Runs on a CUDA driver thread when the stream reaches it.
static void CUDART_CB writeHostTime(void *slot) {
  *static_cast<double *>(slot) =
      std::chrono::duration<double, std::micro>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count();
}

void CudaBackend::recordTime(StreamId s, double *slot) {
  if (setDevice(s))
    note(cudaLaunchHostFunc(streams[s], writeHostTime, slot),
         "cudaLaunchHostFunc", s);
}

void CudaBackend::gemm(StreamId s, const GemmBatch &g) {
  if (s % 2) {
    if (firstError.empty())
      firstError = "a GEMM was issued on " + streamName(s) +
                   "; GEMMs run on compute streams";
    return;
  }
  GemmArgs args;
  args.transA = g.transA;
  args.transB = g.transB;
  args.m = g.m, args.n = g.n, args.k = g.k;
  args.alpha = g.alpha, args.beta = g.beta;
  args.a = g.a, args.lda = g.lda;
  args.b = g.b, args.ldb = g.ldb;
  args.c = g.c, args.ldc = g.ldc;
  // A parameter is the same in every GEMM of a step: converted once.
  if (options.precision == GemmPrecision::BF16 && g.bIsParameter &&
      (g.count == 1 || g.strideB == 0))
    args.bBf16 = bf16CopyOf(s, g);
  noteStatus(blas[s / 2]->gemmStridedBatched(options.precision, args, g.count,
                                             g.strideA, g.strideB, g.strideC),
             s);
}

const void *CudaBackend::bf16CopyOf(StreamId s, const GemmBatch &g) {
  const int64_t rows = g.transB ? g.n : g.k, cols = g.transB ? g.k : g.n;
  if (rows <= 0 || cols <= 0 || !setDevice(s))
    return nullptr;
  const void *copy = nullptr;
  const char *what = "";
  note(bf16Params.copyOf(g.b, size_t((rows - 1) * g.ldb + cols),
                         unsigned(s / 2), gpuOfStream(s), streams[s], &copy,
                         &what),
       what, s);
  return copy;
}

std::string CudaBackend::loadGeneratedKernels(const GeneratedCode &code) {
  if (code.kernels.empty())
    return {};
  if (!code.cuda)
    return "the bundle's generated kernels have no CUDA code: compile with "
           "--gpipe-ptx (gpipe-compile ptx=true), or with codegen=none";
  const CudaCode &cuda = *code.cuda;
  // The reader checked the same of a file; this, of a bundle built in memory.
  if (std::string error = gpipe::runtime::checkCudaCode(cuda, code.kernels);
      !error.empty())
    return "the bundle's CUDA code (code.cuda): " + error;
  if (std::string error = driver.load(); !error.empty())
    return "cannot load the bundle's generated kernels: " + error;
  kernelSpecs = code.kernels;
  modules.assign(gpus.size(), nullptr);
  functions.assign(gpus.size(), {});
  for (unsigned d = 0; d < options.numDevices; ++d) {
    const int gpu = gpuOf[d];
    if (modules[gpu])
      continue;
    // PTX for sm_XY runs on GPUs of compute capability X.Y and later (the
    // driver compiles it); an older GPU would fail in the JIT.
    int wanted = 0; // checkCudaCode: digits after "sm_"
    for (size_t i = 3; i < cuda.arch.size() && wanted < 100000; ++i)
      wanted = wanted * 10 + (cuda.arch[i] - '0');
    const int has = gpus[gpu].computeMajor * 10 + gpus[gpu].computeMinor;
    if (has < wanted)
      return "the bundle's generated kernels are PTX for " + cuda.arch +
             "; GPU " + std::to_string(gpu) + " (" + gpus[gpu].name +
             ") has compute capability " +
             std::to_string(gpus[gpu].computeMajor) + "." +
             std::to_string(gpus[gpu].computeMinor);
    std::string error = loadModule(gpu, cuda, code.kernels);
    if (!error.empty())
      return "device " + std::to_string(d) + " (GPU " + std::to_string(gpu) +
             "): " + error;
  }
  return {};
}

std::string
CudaBackend::loadModule(int gpu, const CudaCode &cuda,
                        const std::vector<GeneratedKernelSpec> &kernels) {
  // The runtime API's primary context of this GPU, made current by
  // cudaSetDevice and created by the first runtime call that needs it.
  cudaError_t rt = cudaSetDevice(gpu);
  if (rt == cudaSuccess)
    rt = cudaFree(nullptr);
  if (rt != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("cudaSetDevice before loading the PTX failed: ") +
           cudaErrorText(int(rt));
  }
  CUcontext context = nullptr;
  CUresult err = driver.ctxGetCurrent(&context);
  if (err != CUDA_SUCCESS || !context)
    return "no current CUDA context to load the PTX in (cuCtxGetCurrent: " +
           (err != CUDA_SUCCESS ? driverErrorText(err)
                                : std::string("none")) +
           ")";
  // The JIT's error log says which line of the PTX it refused and why.
  std::vector<char> log(16384, '\0');
  CUjit_option keys[] = {CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log.data(),
                    reinterpret_cast<void *>(uintptr_t(log.size() - 1))};
  CUmodule module = nullptr;
  err = driver.moduleLoadDataEx(&module, cuda.ptx.c_str(), 2, keys, values);
  if (err != CUDA_SUCCESS) {
    std::string jitLog(log.data());
    while (!jitLog.empty() &&
           (jitLog.back() == '\n' || jitLog.back() == ' '))
      jitLog.pop_back();
    return "cuModuleLoadData of the generated kernels' PTX (" + cuda.arch +
           ", " + std::to_string(cuda.ptx.size()) + " bytes) failed: " +
           driverErrorText(err) +
           (jitLog.empty() ? std::string(" (the JIT logged nothing)")
                           : "; the JIT's log: " + jitLog);
  }
  modules[gpu] = module;
  std::vector<CUfunction> &found = functions[gpu];
  found.assign(kernels.size(), nullptr);
  for (size_t k = 0; k < kernels.size(); ++k) {
    const GeneratedKernelSpec &kernel = kernels[k];
    err = driver.moduleGetFunction(&found[k], module, kernel.symbol.c_str());
    if (err != CUDA_SUCCESS)
      return "the generated kernels' PTX has no kernel '" + kernel.symbol +
             "' (kernel " + std::to_string(k) + ": " + kernel.ops +
             "): cuModuleGetFunction: " + driverErrorText(err);
#if CUDA_VERSION >= 12040
    // The ABI's parameters: inputs, the output, then one size per
    // dimension, 8 bytes each (PtxKernels.h).
    const size_t count = kernel.inputs + 1 + kernel.rank;
    size_t offset = 0, size = 0;
    if (!driver.funcGetParamInfo)
      continue;
    CUresult last =
        driver.funcGetParamInfo(found[k], count - 1, &offset, &size);
    CUresult beyond = driver.funcGetParamInfo(found[k], count, &offset, &size);
    if (last == CUDA_ERROR_INVALID_VALUE || beyond == CUDA_SUCCESS)
      return "the generated kernel '" + kernel.symbol + "' (kernel " +
             std::to_string(k) + ": " + kernel.ops + ") does not take " +
             std::to_string(count) + " parameters (" +
             std::to_string(kernel.inputs) + " inputs, the output, " +
             std::to_string(kernel.rank) +
             " sizes): its PTX does not match the bundle";
#endif
  }
  return {};
}

void CudaBackend::generated(StreamId s, const GeneratedCall &call) {
  if (s % 2) {
    if (firstError.empty())
      firstError = "a generated kernel was issued on " + streamName(s) +
                   "; kernels run on compute streams";
    return;
  }
  const int gpu = gpuOfStream(s);
  if (call.kernel < 0 || size_t(gpu) >= functions.size() ||
      size_t(call.kernel) >= functions[gpu].size() ||
      !functions[gpu][size_t(call.kernel)]) {
    if (firstError.empty())
      firstError = "generated kernel " + std::to_string(call.kernel) +
                   " was issued on " + streamName(s) +
                   ", where no generated kernels are loaded";
    return;
  }
  const size_t count = call.inputs.size();
  const size_t rank = call.space.size();
  if (count < 1 || count > gpipe::runtime::kMaxKernelInputs || rank < 1 ||
      rank > gpipe::runtime::kMaxKernelRank) {
    if (firstError.empty())
      firstError = "generated kernel " + std::to_string(call.kernel) +
                   " was issued with " + std::to_string(count) +
                   " inputs and rank " + std::to_string(rank) + " on " +
                   streamName(s);
    return;
  }
  // The output's own elements (its extents, where fixed: a slice's
  // gradient writes its whole output, zeros outside the window), one
  // thread each.
  const int64_t n = call.outputElements();
  if (n <= 0)
    return; // an empty output needs no launch
  if (!setDevice(s))
    return;
  cudaStream_t stream = streams[s];
  // As on the CPU (separateOverlaps): an input that overlaps the output,
  // other than an element-wise kernel's in-place one, is read from a copy
  // made on the stream before the launch (and freed after it, in order).
  CUdeviceptr pointers[gpipe::runtime::kMaxKernelInputs + 1];
  for (size_t k = 0; k < count; ++k)
    pointers[k] = CUdeviceptr(uintptr_t(call.inputs[k]));
  pointers[count] = CUdeviceptr(uintptr_t(call.output));
  std::vector<void *> scratch;
  for (size_t k : gpipe::runtime::device::overlappingInputs(call)) {
    const size_t bytes = size_t(call.elementsOf(k)) * 4;
    void *copy = nullptr;
    if (!note(cudaMallocAsync(&copy, bytes, stream),
              "cudaMallocAsync (a generated kernel's input copy)", s))
      break;
    scratch.push_back(copy);
    if (!note(cudaMemcpyAsync(copy, call.inputs[k], bytes,
                              cudaMemcpyDeviceToDevice, stream),
              "cudaMemcpyAsync (a generated kernel's input copy)", s))
      break;
    pointers[k] = CUdeviceptr(uintptr_t(copy));
  }
  if (firstError.empty()) {
    int64_t sizes[gpipe::runtime::kMaxKernelRank];
    void *params[gpipe::runtime::kMaxKernelInputs + 1 +
                 gpipe::runtime::kMaxKernelRank];
    size_t p = 0;
    for (size_t k = 0; k <= count; ++k)
      params[p++] = &pointers[k];
    // The space's sizes only: fixed extents are in the PTX itself.
    for (size_t d = 0; d < rank; ++d) {
      sizes[d] = call.space[d];
      params[p++] = &sizes[d];
    }
    // One thread per output element, grid-striding beyond the cap (any
    // launch size is valid: PtxKernels.h).
    const unsigned threads = 256;
    const int64_t wanted = (n + threads - 1) / threads;
    const int64_t blocks = std::min<int64_t>(wanted, int64_t(sms(s)) * 16);
    noteDriver(driver.launchKernel(functions[gpu][size_t(call.kernel)],
                              unsigned(blocks), 1, 1, threads, 1, 1, 0,
                              reinterpret_cast<CUstream>(stream), params,
                              nullptr),
               ("cuLaunchKernel of generated kernel " +
                kernelSpecs[size_t(call.kernel)].symbol)
                   .c_str(),
               s);
  }
  for (void *copy : scratch)
    note(cudaFreeAsync(copy, stream), "cudaFreeAsync", s);
}

std::string CudaBackend::synchronize(std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + timeout;
  for (StreamId s = 0; s < streams.size(); ++s) {
    if (!setDevice(s))
      break;
    for (;;) {
      cudaError_t err = cudaStreamQuery(streams[s]);
      if (err == cudaSuccess)
        break;
      if (err != cudaErrorNotReady) {
        note(err, "the stream's work", s);
        break;
      }
      // cudaErrorNotReady is only an answer, but the runtime also keeps it as
      // the thread's last error: the next launch check would report it.
      (void)cudaGetLastError();
      if (Clock::now() > deadline) {
        if (firstError.empty())
          firstError = streamName(s) + " did not finish within " +
                       std::to_string(timeout.count()) + " ms";
        return firstError;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  for (size_t e = 0; e < events.size(); ++e)
    if (events[e])
      spareEvents[eventGpu[e]].push_back(events[e]);
  events.clear();
  eventGpu.clear();
  // The optimizer may change the parameters before the next GEMMs.
  bf16Params.stepEnded();
  return firstError;
}

} // namespace

std::unique_ptr<DeviceBackend>
gpipe::cuda::createCudaBackend(const CudaBackendOptions &options,
                               std::string &error) {
  std::vector<GpuInfo> gpus;
  CudaStatus status = queryGpus(gpus);
  if (!status.ok) {
    error = status.message;
    return nullptr;
  }
  if (options.maxGpus > 0 && int(gpus.size()) > options.maxGpus)
    gpus.resize(options.maxGpus);
  std::vector<int> gpuOf;
  status = mapPipelineDevices(int(options.numDevices), int(gpus.size()),
                              options.allowSharing, gpuOf);
  if (!status.ok) {
    error = status.message;
    return nullptr;
  }
  auto backend = std::make_unique<CudaBackend>(options, std::move(gpus),
                                               std::move(gpuOf));
  error = backend->init();
  if (!error.empty())
    return nullptr;
  return backend;
}
