//===- ResNetBuilder.cpp - CIFAR-style ResNets as gpipe text --------------===//

#include "gpipe/Models/ResNetBuilder.h"
#include "gpipe/Models/ModelName.h"

#include <cstdio>
#include <sstream>

using namespace gpipe;

std::string gpipe::validateResNetConfig(const ResNetConfig &config) {
  for (auto [what, value] :
       {std::pair<const char *, int64_t>{"number of blocks per group",
                                         config.blocksPerGroup},
        {"width", config.width},
        {"batch", config.batch},
        {"image height", config.height},
        {"image width", config.imageWidth},
        {"number of channels", config.channels},
        {"number of classes", config.classes}})
    if (value <= 0)
      return std::string("expects a positive ") + what + ", got " +
             std::to_string(value);
  if (config.height < 4 || config.imageWidth < 4)
    return "expects an image of at least 4 x 4 pixels (two halvings), got " +
           std::to_string(config.height) + " x " +
           std::to_string(config.imageWidth);
  if (!(config.momentum >= 0.0 && config.momentum <= 1.0))
    return "expects a batch-norm momentum in [0, 1], got " +
           std::to_string(config.momentum);
  return validateModelName(config.name);
}

uint64_t gpipe::countResNetParameters(const ResNetConfig &config) {
  const uint64_t w = config.width;
  auto conv = [](uint64_t k, uint64_t in, uint64_t out) {
    return k * k * in * out + 2 * out; // weight, batch norm's gamma and beta
  };
  uint64_t total = conv(3, config.channels, w);
  uint64_t in = w;
  for (int group = 0; group < 3; ++group) {
    const uint64_t out = w << group;
    for (int64_t b = 0; b < config.blocksPerGroup; ++b) {
      total += conv(3, in, out) + conv(3, out, out);
      if (in != out)
        total += conv(1, in, out);
      in = out;
    }
  }
  return total + in * config.classes + config.classes;
}

namespace {
/// Writes the network line by line.
class Writer {
public:
  explicit Writer(const ResNetConfig &config) : c(config) {
    char text[32];
    std::snprintf(text, sizeof(text), "%e", config.momentum);
    momentum = text;
  }

  std::string write() {
    os << "gpipe.model @" << c.name << " batch " << c.batch << " {\n";
    std::string input = image(c.height, c.imageWidth, c.channels);
    os << "  %x = gpipe.input \"x\" : " << input << "\n";
    os << "  %labels = gpipe.input \"labels\" : tensor<" << c.batch
       << "xi32>\n";
    Shape at{c.height, c.imageWidth, c.channels};
    // Stem.
    Shape out{at.h, at.w, c.width};
    open("%h0", "stem", out);
    std::string y = convNorm("stem", "%x", at, c.width, 3, 1);
    finish(relu(y, out), out);
    std::string h = "%h0";
    at = out;
    int64_t layer = 0;
    for (int group = 0; group < 3; ++group) {
      const int64_t filters = c.width << group;
      for (int64_t b = 0; b < c.blocksPerGroup; ++b) {
        const int64_t stride = group > 0 && b == 0 ? 2 : 1;
        std::string prefix =
            "g" + std::to_string(group + 1) + ".b" + std::to_string(b + 1);
        h = writeBlock(prefix, h, at, filters, stride, layer);
        at = {(at.h - 1) / stride + 1, (at.w - 1) / stride + 1, filters};
        layer += 2;
      }
    }
    writeHead(h, at);
    os << "  gpipe.return %loss : tensor<f32>\n}\n";
    return os.str();
  }

private:
  struct Shape {
    int64_t h, w, c;
  };
  std::string image(int64_t h, int64_t w, int64_t ch) const {
    return "tensor<" + std::to_string(c.batch) + "x" + std::to_string(h) + "x" +
           std::to_string(w) + "x" + std::to_string(ch) + "xf32>";
  }
  std::string image(const Shape &s) const { return image(s.h, s.w, s.c); }
  static std::string vec(int64_t n) {
    return "tensor<" + std::to_string(n) + "xf32>";
  }
  std::string fresh() { return "%" + std::to_string(next++); }

  void open(const std::string &result, const std::string &name,
            const Shape &out) {
    os << "  " << result << " = gpipe.layer \"" << name << "\" -> "
       << image(out) << " {\n";
    next = 0;
  }
  void finish(const std::string &value, const Shape &out) {
    os << "    gpipe.yield " << value << " : " << image(out) << "\n  }\n";
  }
  void param(const std::string &value, const std::string &name,
             const char *init, const std::string &type) {
    os << "    " << value << " = gpipe.param \"" << name << "\" " << init
       << " : " << type << "\n";
  }
  /// conv (k x k, stride, "same" padding, no bias), then batch norm.
  std::string convNorm(const std::string &prefix, const std::string &input,
                       const Shape &in, int64_t filters, int64_t k,
                       int64_t stride) {
    const Shape out{(in.h - 1) / stride + 1, (in.w - 1) / stride + 1, filters};
    const std::string weight = "tensor<" + std::to_string(k) + "x" +
                               std::to_string(k) + "x" + std::to_string(in.c) +
                               "x" + std::to_string(filters) + "xf32>";
    const std::string w = fresh(), conv = fresh();
    param(w, prefix + ".conv.w", "glorot_uniform", weight);
    os << "    " << conv << " = gpipe.conv2d " << input << ", " << w
       << " stride [" << stride << ", " << stride << "] padding [" << k / 2
       << ", " << k / 2 << "] : (" << image(in) << ", " << weight << ") -> "
       << image(out) << "\n";
    const std::string gamma = fresh(), beta = fresh(), mean = fresh(),
                      variance = fresh(), y = fresh();
    param(gamma, prefix + ".bn.gamma", "ones", vec(filters));
    param(beta, prefix + ".bn.beta", "zeros", vec(filters));
    param(mean, prefix + ".bn.mean", "zeros", vec(filters));
    param(variance, prefix + ".bn.var", "ones", vec(filters));
    os << "    " << y << " = gpipe.batch_norm " << conv << ", " << gamma << ", "
       << beta << ", " << mean << ", " << variance
       << " {momentum = " << momentum << " : f64} : (" << image(out) << ", "
       << vec(filters) << ", " << vec(filters) << ", " << vec(filters) << ", "
       << vec(filters) << ") -> " << image(out) << "\n";
    return y;
  }
  std::string relu(const std::string &x, const Shape &s) {
    std::string y = fresh();
    os << "    " << y << " = gpipe.relu " << x << " : " << image(s) << "\n";
    return y;
  }

  /// Two layers; returns the block's output value.
  std::string writeBlock(const std::string &prefix, const std::string &input,
                         const Shape &in, int64_t filters, int64_t stride,
                         int64_t layer) {
    const Shape out{(in.h - 1) / stride + 1, (in.w - 1) / stride + 1, filters};
    const std::string mid = "%a" + std::to_string(layer / 2 + 1);
    const std::string result = "%h" + std::to_string(layer / 2 + 1);
    open(mid, prefix + ".a", out);
    finish(
        relu(convNorm(prefix + ".conv1", input, in, filters, 3, stride), out),
        out);
    open(result, prefix + ".b", out);
    std::string y = convNorm(prefix + ".conv2", mid, out, filters, 3, 1);
    std::string shortcut = input;
    if (stride != 1 || in.c != filters)
      shortcut = convNorm(prefix + ".shortcut", input, in, filters, 1, stride);
    std::string sum = fresh();
    os << "    " << sum << " = gpipe.add " << y << ", " << shortcut << " : "
       << image(out) << "\n";
    finish(relu(sum, out), out);
    return result;
  }

  void writeHead(const std::string &input, const Shape &in) {
    const std::string logits = "tensor<" + std::to_string(c.batch) + "x" +
                               std::to_string(c.classes) + "xf32>";
    const std::string pooled = "tensor<" + std::to_string(c.batch) + "x" +
                               std::to_string(in.c) + "xf32>";
    const std::string weight = "tensor<" + std::to_string(in.c) + "x" +
                               std::to_string(c.classes) + "xf32>";
    os << "  %logits = gpipe.layer \"head\" -> " << logits << " {\n";
    os << "    %0 = gpipe.global_avg_pool " << input << " : (" << image(in)
       << ") -> " << pooled << "\n";
    os << "    %w = gpipe.param \"head.w\" glorot_uniform : " << weight << "\n";
    os << "    %b = gpipe.param \"head.b\" zeros : " << vec(c.classes) << "\n";
    os << "    %1 = gpipe.dense %0, %w, %b : (" << pooled << ", " << weight
       << ", " << vec(c.classes) << ") -> " << logits << "\n";
    os << "    gpipe.yield %1 : " << logits << "\n  }\n";
    os << "  %loss = gpipe.layer \"loss\" -> tensor<f32> {\n";
    os << "    %0 = gpipe.softmax_cross_entropy %logits, %labels : (" << logits
       << ", tensor<" << c.batch << "xi32>) -> tensor<f32>\n";
    os << "    gpipe.yield %0 : tensor<f32>\n  }\n";
  }

  const ResNetConfig &c;
  std::ostringstream os;
  std::string momentum;
  int next = 0;
};
} // namespace

std::string gpipe::buildResNetModel(const ResNetConfig &config) {
  return Writer(config).write();
}
