//===- CpuBackend.h - K pipeline devices as CPU threads ---------*- C++ -*-===//
//
// The device executor's backend for CPU training: each pipeline device is one
// worker thread that runs its stream's work in order (the device's compute
// and copy streams share that thread: on a CPU a copy is a memcpy, and one
// queue per device keeps stream order trivially). The host issues a whole
// step into the queues, then `synchronize` releases the workers, which run
// concurrently; an event wait blocks a worker until the recording worker
// has passed the event. GEMMs go to CBLAS, single-threaded (the backend sets
// OpenBLAS to one thread for the whole process: the devices already use the
// cores), the other kernels are the vectorized CPU kernels.
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

#include "gpipe/runtime/device/HostWork.h"
#include "gpipe/runtime/device/KernelsByFunctor.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gpipe::runtime::device {

class CpuBackend final
    : public KernelsByFunctor<CpuBackend, HostStreamBackend> {
public:
  explicit CpuBackend(unsigned numDevices);
  ~CpuBackend() override;

  std::string describe() const override;
  unsigned numDevices() const override { return devices; }
  std::string allocate(unsigned device, int64_t bytes, void **pointer) override;
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
  void biasActivation(StreamId s, const float *bias, float *h, float *y,
                      int64_t rows, int64_t cols, Activation act) override;
  void addLayerNorm(StreamId s, const float *a, const float *b, float *sum,
                    const float *gamma, const float *beta, float *y,
                    float *mean, float *rstd, int64_t rows, int64_t cols,
                    float epsilon) override;
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
                     int64_t step) override;
  void attention(StreamId s, const AttentionCall &call) override;
  void attentionGrad(StreamId s, const AttentionGradCall &call) override;
  int64_t attentionGradScratch(int64_t batch, int64_t seq, int64_t width,
                               int64_t heads) const override;

  std::string synchronize(std::chrono::milliseconds timeout) override;
  std::string error() const override;

  struct Impl;

private:
  void enqueue(StreamId stream, std::function<void()> work) override;

  unsigned devices;
  std::unique_ptr<Impl> impl;
};

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_DEVICE_CPUBACKEND_H
