//===- CpuKernelsBenchmark.cpp - Throughput of the CPU kernels ------------===//
//
// Times every forward and backward kernel at transformer-like sizes on one
// BLAS thread and prints milliseconds per call and GFLOP/s (for the products)
// or GB/s of touched memory (for the element-wise and row kernels). Causal
// attention is charged the full (non-causal) FLOPs, so its GFLOP/s is nominal.
//
// Usage: gpipe-kernel-bench [tokens [width [heads [seq]]]]
//   defaults: 1024 tokens, width 512, 8 heads, sequences of 128.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/CpuKernels.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

using namespace gpipe::runtime;

namespace {

std::vector<float> randomFloats(size_t n, float scale = 1.0f) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float &e : v)
    e = dist(rng);
  return v;
}

/// Median-free but warm: one untimed call, then enough calls for ~0.2 s.
double secondsPerCall(const std::function<void()> &body) {
  using Clock = std::chrono::steady_clock;
  body();
  int calls = 0;
  auto start = Clock::now();
  double elapsed = 0.0;
  do {
    body();
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < 0.2);
  return elapsed / calls;
}

void report(const char *name, double seconds, double flops, double bytes) {
  std::printf("%-26s %9.3f ms", name, seconds * 1e3);
  if (flops > 0)
    std::printf("  %7.1f GFLOP/s", flops / seconds * 1e-9);
  if (bytes > 0)
    std::printf("  %7.2f GB/s", bytes / seconds * 1e-9);
  std::printf("\n");
}

} // namespace

int main(int argc, char **argv) {
  int64_t tokens = argc > 1 ? std::atoll(argv[1]) : 1024;
  int64_t width = argc > 2 ? std::atoll(argv[2]) : 512;
  int64_t heads = argc > 3 ? std::atoll(argv[3]) : 8;
  int64_t seq = argc > 4 ? std::atoll(argv[4]) : 128;
  if (tokens <= 0 || width <= 0 || heads <= 0 || seq <= 0 ||
      width % heads != 0 || tokens % seq != 0) {
    std::fprintf(stderr, "need width %% heads == 0 and tokens %% seq == 0\n");
    return 1;
  }
  int64_t batch = tokens / seq;
  int64_t hidden = 4 * width;
  cpu::useSingleThreadedBlas();
  std::printf("tokens %lld, width %lld, heads %lld, seq %lld, one BLAS "
              "thread\n",
              (long long)tokens, (long long)width, (long long)heads,
              (long long)seq);

  const double f = sizeof(float);
  const double n = static_cast<double>(tokens * width);
  auto x = randomFloats(tokens * width), dy = randomFloats(tokens * width);
  std::vector<float> y(tokens * width), dx(tokens * width);

  // dense width -> 4 width.
  {
    auto w = randomFloats(width * hidden, 0.05f), b = randomFloats(hidden);
    std::vector<float> h(tokens * hidden), dh = randomFloats(tokens * hidden),
        dw(width * hidden), db(hidden);
    double flops = 2.0 * tokens * width * hidden;
    report("dense fwd", secondsPerCall([&] {
             cpu::denseForward(x.data(), w.data(), b.data(), h.data(), tokens,
                               width, hidden);
           }),
           flops, 0);
    report("dense bwd", secondsPerCall([&] {
             cpu::denseBackward(dh.data(), x.data(), w.data(), dx.data(),
                                dw.data(), db.data(), tokens, width, hidden);
           }),
           2 * flops, 0);
  }

  // attention.
  for (bool causal : {false, true}) {
    auto wqkv = randomFloats(width * 3 * width, 0.05f),
         wo = randomFloats(width * width, 0.05f);
    std::vector<float> qkv(tokens * 3 * width),
        lse(batch * heads * seq), context(tokens * width),
        dwqkv(width * 3 * width), dwo(width * width),
        scratch(4 * tokens * width);
    double projFlops = 2.0 * tokens * width * 4 * width;
    double coreFlops = 4.0 * batch * heads * seq * seq * (width / heads);
    report(causal ? "attention fwd (causal)" : "attention fwd",
           secondsPerCall([&] {
             cpu::attentionForward(x.data(), wqkv.data(), wo.data(), nullptr,
                                   nullptr, y.data(), qkv.data(), lse.data(),
                                   context.data(), batch, seq, width, heads,
                                   causal);
           }),
           projFlops + coreFlops, 0);
    report(causal ? "attention bwd (causal)" : "attention bwd",
           secondsPerCall([&] {
             cpu::attentionBackward(dy.data(), x.data(), wqkv.data(), wo.data(),
                                    qkv.data(), lse.data(), context.data(),
                                    dx.data(), dwqkv.data(), dwo.data(),
                                    nullptr, nullptr, scratch.data(), batch,
                                    seq, width, heads, causal);
           }),
           2 * (projFlops + coreFlops), 0);
  }

  // element-wise and row kernels over [tokens, width].
  report("relu fwd", secondsPerCall([&] {
           cpu::reluForward(x.data(), y.data(), tokens * width);
         }),
         0, 2 * n * f);
  report("gelu fwd", secondsPerCall([&] {
           cpu::geluForward(x.data(), y.data(), tokens * width);
         }),
         0, 2 * n * f);
  report("gelu bwd", secondsPerCall([&] {
           cpu::geluBackward(x.data(), dy.data(), dx.data(), tokens * width);
         }),
         0, 3 * n * f);
  // The exact GELU (ONNX imports of nn.GELU()): libm's erfc per element.
  report("gelu_erf fwd", secondsPerCall([&] {
           cpu::geluErfForward(x.data(), y.data(), tokens * width);
         }),
         0, 2 * n * f);
  report("gelu_erf bwd", secondsPerCall([&] {
           cpu::geluErfBackward(x.data(), dy.data(), dx.data(), tokens * width);
         }),
         0, 3 * n * f);
  report("add fwd", secondsPerCall([&] {
           cpu::addForward(x.data(), dy.data(), y.data(), tokens * width);
         }),
         0, 3 * n * f);
  report("softmax fwd", secondsPerCall([&] {
           cpu::softmaxForward(x.data(), y.data(), tokens, width);
         }),
         0, 2 * n * f);
  {
    auto gamma = randomFloats(width), beta = randomFloats(width);
    std::vector<float> mean(tokens), rstd(tokens), dgamma(width),
        dbeta(width);
    report("layer norm fwd", secondsPerCall([&] {
             cpu::layerNormForward(x.data(), gamma.data(), beta.data(),
                                   y.data(), mean.data(), rstd.data(), tokens,
                                   width, 1e-5f);
           }),
           0, 2 * n * f);
    report("layer norm bwd", secondsPerCall([&] {
             cpu::layerNormBackward(dy.data(), x.data(), gamma.data(),
                                    mean.data(), rstd.data(), dx.data(),
                                    dgamma.data(), dbeta.data(), tokens,
                                    width);
           }),
           0, 3 * n * f);
  }
  {
    std::vector<uint8_t> mask(tokens * width);
    uint64_t step = 0;
    report("dropout fwd", secondsPerCall([&] {
             cpu::dropoutForward(x.data(), y.data(), mask.data(), tokens,
                                 width, 0.1f, 1234, step++, 0);
           }),
           0, n * (2 * f + 1));
    report("dropout bwd", secondsPerCall([&] {
             cpu::dropoutBackward(mask.data(), dy.data(), dx.data(),
                                  tokens * width, 0.1f);
           }),
           0, n * (2 * f + 1));
  }
  {
    int64_t classes = 8 * width;
    auto logits = randomFloats(tokens * classes);
    std::vector<float> probs(tokens * classes), dlogits(tokens * classes);
    std::vector<int32_t> labels(tokens);
    for (int64_t i = 0; i < tokens; ++i)
      labels[i] = static_cast<int32_t>((i * 7919) % classes);
    int64_t bad = -1;
    double bytes = 2.0 * tokens * classes * f;
    report("cross entropy fwd", secondsPerCall([&] {
             cpu::softmaxCrossEntropyForward(logits.data(), labels.data(),
                                             probs.data(), tokens, classes,
                                             &bad);
           }),
           0, bytes);
    report("cross entropy bwd", secondsPerCall([&] {
             cpu::softmaxCrossEntropyBackward(probs.data(), labels.data(),
                                              0.5f, dlogits.data(), tokens,
                                              classes);
           }),
           0, bytes);
  }
  return 0;
}
