//===- CpuBackend.h - K pipeline devices as CPU threads ---------*- C++ -*-===//
//
// The device executor's backend for CPU training: each pipeline device is one
// worker thread that runs its stream's work in order (the device's compute
// and copy streams share that thread: on a CPU a copy is a memcpy, and one
// queue per device keeps stream order trivially). The host issues a whole
// step into the queues, then `synchronize` releases the workers, which run
// concurrently; an event wait blocks a worker until the recording worker
// has passed the event. GEMMs go to CBLAS, except those that multiply by a
// parameter, which on CPUs with AVX-512 or AVX2 use a copy packed once per step
// (PackedGemm.h); the other kernels are the vectorized CPU kernels.
//
// Threads: with fewer devices than cores, each device splits its kernels
// over `threadsPerDevice` threads (IntraOpPool.h): GEMMs by rows of C in
// whole kBlasRowGrain parts (BlasLibrary.h) or by batch entries, element-wise,
// row and column kernels by their index ranges, each index on one thread with
// the single-threaded arithmetic, so the bits do not depend on the thread
// count. OpenBLAS itself stays single-threaded (set for the whole process: its
// own pool would compete with these threads). With `pinThreads`, device d's
// threads take the allowed cores d*T ... d*T+T-1 (round robin when there are
// fewer cores).
//
// Because the executor issues in an order in which every event is recorded
// before it is waited for (verifySchedule's), the workers cannot wait for
// each other in a cycle: the worker holding the earliest pending event in
// issue order can always run.
//
// A wait that lasts longer than `synchronize`'s timeout ends the step with a
// message naming the waiting device and the device it waited for.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_CPUBACKEND_H
#define GPIPE_RUNTIME_DEVICE_CPUBACKEND_H

#include "gpipe/runtime/backends/HostWork.h"
#include "gpipe/runtime/backends/cpu/IntraOpPool.h"
#include "gpipe/runtime/kernels/KernelsByFunctor.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gpipe::runtime::device {

class CpuBackend final : public KernelsByFunctor<CpuBackend, HostStreamBackend>,
                         public DeviceGating {
public:
  explicit CpuBackend(unsigned numDevices, CpuThreading threading = {});
  ~CpuBackend() override;

  unsigned threadsPerDevice() const { return threads; }

  // KernelsByFunctor's loops, split over the device's threads.
  template <class F> void forEach(StreamId s, int64_t n, const F &f) {
    IntraOpPool *pool = poolOf(s);
    enqueue(s, [f, n, pool] {
      pool->parallelFor(n, kElementGrain, [&f](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          f(i);
      });
    });
  }
  template <class F> void forEachRow(StreamId s, int64_t rows, const F &f) {
    IntraOpPool *pool = poolOf(s);
    enqueue(s, [f, rows, pool] {
      pool->parallelFor(rows, kRowGrain, [&f](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r)
          kernels::runRowOnHost(f, r);
      });
    });
  }
  template <class F> void forEachColumn(StreamId s, int64_t cols, const F &f) {
    IntraOpPool *pool = poolOf(s);
    enqueue(s, [f, cols, pool] {
      pool->parallelFor(cols, kColumnGrain, [&f](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c)
          kernels::runColumnOnHost(f, c);
      });
    });
  }

  std::string describe() const override;
  unsigned numDevices() const override { return devices; }
  std::string allocate(unsigned device, int64_t bytes, void **pointer) override;
  void gemm(StreamId s, const GemmBatch &call) override;
  /// One closure: the matrices of y over the device's threads, one BLAS
  /// call each (CpuGemm.h's runMatmulSplit).
  void matmul(StreamId s, const MatmulCall &call) override;
  /// The packed copies of device `device`'s parameters (PackedGemm.h).
  int64_t workspaceBytes(unsigned device) const override;
  /// Every precision: the GEMMs compute in f32 whatever the bundle asks
  /// (no bf16 kernels here yet; docs/Cuda.md), which only narrows the
  /// difference from f32 training.
  std::string usePrecision(Precision) override { return {}; }
  /// Panels of device `device`'s parameters packed while it waited for a
  /// peer, since construction (PackedWeightCache::packAhead); any thread.
  int64_t panelsPackedAhead(unsigned device) const;
  /// The stretches of packing ahead, one per wait that packed.
  std::vector<std::pair<double, double>>
  takeWorkInWaits(unsigned device) override;
  /// None: the workers copy from the caller's memory as fast.
  std::string allocateStaging(int64_t, void **pointer) override {
    *pointer = nullptr;
    return {};
  }
  StreamId computeStream(unsigned device) override { return 2 * device; }
  StreamId copyStream(unsigned device) override { return 2 * device + 1; }
  EventId recordEvent(StreamId stream) override;
  void waitEvent(StreamId stream, EventId event) override;

  // The vectorized CPU kernels (CpuKernels.h) where they compute the same
  // function; the rest run DeviceKernels.h's bodies.
  void relu(StreamId s, const float *x, float *y, int64_t n) override;
  void reluGrad(StreamId s, const float *x, const float *dy, float *dx,
                int64_t n) override;
  void gelu(StreamId s, const float *x, float *y, int64_t n) override;
  void geluGrad(StreamId s, const float *x, const float *dy, float *dx,
                int64_t n) override;
  void geluErf(StreamId s, const float *x, float *y, int64_t n) override;
  void geluErfGrad(StreamId s, const float *x, const float *dy, float *dx,
                   int64_t n) override;
  void tanh(StreamId s, const float *x, float *y, int64_t n) override;
  void tanhGrad(StreamId s, const float *y, const float *dy, float *dx,
                int64_t n) override;
  void add(StreamId s, const float *a, const float *b, float *y,
           int64_t n) override;
  void softmax(StreamId s, const float *x, float *y, int64_t rows, int64_t cols,
               int64_t causalSeq) override;
  void softmaxGrad(StreamId s, const float *y, const float *dy, float *dx,
                   int64_t rows, int64_t cols) override;
  void layerNorm(StreamId s, const float *x, const float *gamma,
                 const float *beta, float *y, float *mean, float *rstd,
                 int64_t rows, int64_t cols, float epsilon) override;
  void layerNormGradInput(StreamId s, const float *dy, const float *x,
                          const float *gamma, const float *mean,
                          const float *rstd, float *dx, int64_t rows,
                          int64_t cols) override;
  void layerNormGradParams(StreamId s, const float *dy, const float *x,
                           const float *mean, const float *rstd, float *dgamma,
                           float *dbeta, int64_t rows, int64_t cols) override;
  void biasActivation(StreamId s, const float *bias, float *h, float *y,
                      int64_t rows, int64_t cols, Activation act) override;
  void addLayerNorm(StreamId s, const float *a, const float *b, float *sum,
                    const float *gamma, const float *beta, float *y,
                    float *mean, float *rstd, int64_t rows, int64_t cols,
                    float epsilon) override;
  void embedding(StreamId s, const int32_t *ids, const float *table, float *y,
                 int64_t n, int64_t width) override;
  void embeddingGrad(StreamId s, const int32_t *ids, const float *dy,
                     float *dtable, int64_t n, int64_t width) override;
  void dropout(StreamId s, const float *x, float *y, uint8_t *mask,
               int64_t rows, int64_t cols, float rate, uint64_t seed,
               uint64_t step, int64_t rowOffset) override;
  void dropoutGrad(StreamId s, const uint8_t *mask, const float *dy, float *dx,
                   int64_t n, float rate) override;
  void softmaxCrossEntropy(StreamId s, const float *logits,
                           const int32_t *labels, float *probs, float *loss,
                           int64_t rows, int64_t classes) override;
  void softmaxCrossEntropyGrad(StreamId s, const float *probs,
                               const int32_t *labels, float scale,
                               float *dlogits, int64_t rows,
                               int64_t classes) override;
  void mse(StreamId s, const float *prediction, const float *target,
           float *loss, int64_t n) override;
  void mseGrad(StreamId s, const float *prediction, const float *target,
               float scale, float *dprediction, int64_t n) override;
  void accumulate(StreamId s, const float *x, float *y, int64_t n) override;
  void addRowVector(StreamId s, const float *bias, float *y, int64_t rows,
                    int64_t cols) override;
  void columnSums(StreamId s, const float *x, float *sums, int64_t rows,
                  int64_t cols) override;
  void im2col(StreamId s, const float *x, float *patches,
              const WindowGeometry &g) override;
  void col2im(StreamId s, const float *patches, float *dx,
              const WindowGeometry &g) override;
  void optimizerStep(StreamId s, const OptimizerConfig &config, float *params,
                     const float *grads, float *const *slots, int64_t n,
                     const StepScalars *step) override;
  void attention(StreamId s, const AttentionCall &call) override;
  void attentionGrad(StreamId s, const AttentionGradCall &call) override;
  int64_t attentionScratch(int64_t batch, int64_t seq, int64_t width,
                           int64_t heads) const override;
  int64_t attentionGradScratch(int64_t batch, int64_t seq, int64_t width,
                               int64_t heads) const override;
  /// Split over the device's threads as relu is: element-wise code runs
  /// each range apart.
  void generated(StreamId s, const GeneratedCall &call) override;

  std::string synchronize(std::chrono::milliseconds timeout) override;
  std::string error() const override;

  // The devices share the host's memory: a step is decided on them
  // (CpuGating.cpp), unless CpuThreading::decideOnDevices is off.
  DeviceGating *gating() override;
  void decide(StreamId s, const GateRequest &request, StepGate *gate) override;
  void gatedOptimizerStep(StreamId s, const OptimizerConfig &config,
                          float *params, const float *grads,
                          float *const *slots, int64_t n,
                          const StepScalars *step, const StepGate *gate,
                          int32_t *nonFinite) override;
  void gatedBatchNormRunningUpdate(StreamId s, float *runningMean,
                                   float *runningVar, const float *sum,
                                   const float *squares, int64_t cols,
                                   int64_t count, float momentum,
                                   const StepGate *gate, int32_t *meanNonFinite,
                                   int32_t *varNonFinite) override;

  struct Impl;

  /// Items per chunk, at least, where a kernel is split: below two chunks'
  /// worth it runs on one thread (a hand-off costs a few microseconds).
  static constexpr int64_t kElementGrain = 16384;
  static constexpr int64_t kRowGrain = 32;
  static constexpr int64_t kColumnGrain = 64;

private:
  void enqueue(StreamId stream, std::function<void()> work) override;
  IntraOpPool *poolOf(StreamId stream) const;
  /// Enqueues body(begin, end) over [0, n) split over the device's threads
  /// (elements), or over `rows` rows of `cols` elements.
  template <class Body> void split(StreamId s, int64_t n, Body body);
  template <class Body>
  void splitRows(StreamId s, int64_t rows, int64_t cols, Body body);

  unsigned devices;
  unsigned threads;
  std::unique_ptr<Impl> impl;
};

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_DEVICE_CPUBACKEND_H
