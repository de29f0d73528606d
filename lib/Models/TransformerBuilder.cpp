//===- TransformerBuilder.cpp - Decoder-only Transformers as gpipe text ---===//

#include "gpipe/Models/TransformerBuilder.h"
#include "gpipe/Models/ModelName.h"

#include <cstdio>
#include <sstream>

using namespace gpipe;

std::string gpipe::validateTransformerConfig(const TransformerConfig &config) {
  auto positive = [](const char *what, int64_t value) -> std::string {
    if (value > 0)
      return {};
    return std::string("expects a positive ") + what + ", got " +
           std::to_string(value);
  };
  if (config.blocks < 0)
    return "expects a non-negative number of blocks, got " +
           std::to_string(config.blocks);
  for (auto [what, value] :
       {std::pair<const char *, int64_t>{"width", config.width},
        {"number of heads", config.heads},
        {"MLP width", config.ffWidth},
        {"sequence length", config.seq},
        {"batch", config.batch},
        {"vocabulary", config.vocab}})
    if (std::string error = positive(what, value); !error.empty())
      return error;
  if (config.width % config.heads != 0)
    return "expects the number of heads to divide the width " +
           std::to_string(config.width) + ", got " +
           std::to_string(config.heads) + " heads";
  if (!(config.dropout >= 0.0 && config.dropout < 1.0))
    return "expects a dropout rate in [0, 1), got " +
           std::to_string(config.dropout);
  return validateModelName(config.name);
}

uint64_t gpipe::countTransformerParameters(const TransformerConfig &config) {
  uint64_t w = config.width, f = config.ffWidth;
  uint64_t embed = config.vocab * w + config.seq * w;
  uint64_t attn = 2 * w + w * 3 * w + w * w;
  uint64_t mlp = 2 * w + w * f + f + f * w + w;
  uint64_t head = 2 * w + w * config.vocab;
  return embed + config.blocks * (attn + mlp) + head;
}

namespace {
/// Writes the model line by line; `t(...)` spells tensor types.
class Writer {
public:
  explicit Writer(const TransformerConfig &config) : c(config) {
    char rate[32];
    std::snprintf(rate, sizeof(rate), "%e", config.dropout);
    dropoutRate = rate;
    std::string n = std::to_string(c.batch), s = std::to_string(c.seq);
    tokens = t(n + "x" + s, "i32");
    hidden = t(n + "x" + s + "x" + std::to_string(c.width));
    vec = t(std::to_string(c.width));
  }

  std::string write() {
    os << "gpipe.model @" << c.name << " batch " << c.batch << " {\n";
    for (const char *input : {"ids", "positions", "targets"})
      os << "  %" << input << " = gpipe.input \"" << input << "\" : " << tokens
         << "\n";
    writeEmbed();
    for (int64_t b = 0; b < c.blocks; ++b) {
      writeAttention(b);
      writeMlp(b);
    }
    writeHead();
    os << "  gpipe.return %loss : tensor<f32>\n}\n";
    return os.str();
  }

private:
  static std::string t(const std::string &shape,
                       const std::string &element = "f32") {
    return "tensor<" + shape + "x" + element + ">";
  }
  std::string mat(int64_t rows, int64_t cols) const {
    return t(std::to_string(rows) + "x" + std::to_string(cols));
  }
  /// The residual stream after `layer` layers: %h0 after embed, and so on.
  static std::string h(int64_t layer) { return "%h" + std::to_string(layer); }

  void param(const char *value, const std::string &name, const char *init,
             const std::string &type) {
    os << "    %" << value << " = gpipe.param \"" << name << "\" " << init
       << " : " << type << "\n";
  }
  void normParams(const std::string &prefix) {
    param("g", prefix + ".ln.gamma", "ones", vec);
    param("b", prefix + ".ln.beta", "zeros", vec);
  }
  void normOp(const std::string &input) {
    os << "    %0 = gpipe.layer_norm " << input << ", %g, %b : (" << hidden
       << ", " << vec << ", " << vec << ") -> " << hidden << "\n";
  }
  void dropoutAndResidual(unsigned result, const std::string &residual) {
    os << "    %" << result << " = gpipe.dropout %" << result - 1 << " rate "
       << dropoutRate << " seed " << ++seed << " : " << hidden << "\n";
    os << "    %" << result + 1 << " = gpipe.add " << residual << ", %"
       << result << " : " << hidden << "\n";
    os << "    gpipe.yield %" << result + 1 << " : " << hidden << "\n";
    os << "  }\n";
  }

  void writeEmbed() {
    std::string table = mat(c.vocab, c.width), pos = mat(c.seq, c.width);
    os << "  %h0 = gpipe.layer \"embed\" -> " << hidden << " {\n";
    os << "    %tok = gpipe.param \"embed.tokens\" normal scale 0.02 : "
       << table << "\n";
    os << "    %pos = gpipe.param \"embed.positions\" normal scale 0.02 : "
       << pos << "\n";
    os << "    %0 = gpipe.embedding %ids, %tok : (" << tokens << ", " << table
       << ") -> " << hidden << "\n";
    os << "    %1 = gpipe.embedding %positions, %pos : (" << tokens << ", "
       << pos << ") -> " << hidden << "\n";
    os << "    %2 = gpipe.add %0, %1 : " << hidden << "\n";
    os << "    gpipe.yield %2 : " << hidden << "\n";
    os << "  }\n";
  }

  void writeAttention(int64_t block) {
    std::string prefix = "block" + std::to_string(block) + ".attn";
    std::string in = h(2 * block), qkv = mat(c.width, 3 * c.width),
                out = mat(c.width, c.width);
    os << "  " << h(2 * block + 1) << " = gpipe.layer \"" << prefix << "\" -> "
       << hidden << " {\n";
    normParams(prefix);
    param("wqkv", prefix + ".qkv", "glorot_uniform", qkv);
    param("wo", prefix + ".out", "glorot_uniform", out);
    normOp(in);
    os << "    %1 = gpipe.attention %0, %wqkv, %wo heads " << c.heads
       << " causal : (" << hidden << ", " << qkv << ", " << out << ") -> "
       << hidden << "\n";
    dropoutAndResidual(2, in);
  }

  void writeMlp(int64_t block) {
    std::string prefix = "block" + std::to_string(block) + ".mlp";
    std::string in = h(2 * block + 1), w1 = mat(c.width, c.ffWidth),
                b1 = t(std::to_string(c.ffWidth)), w2 = mat(c.ffWidth, c.width),
                wide = t(std::to_string(c.batch) + "x" + std::to_string(c.seq) +
                         "x" + std::to_string(c.ffWidth));
    os << "  " << h(2 * block + 2) << " = gpipe.layer \"" << prefix << "\" -> "
       << hidden << " {\n";
    normParams(prefix);
    param("w1", prefix + ".fc1.w", "glorot_uniform", w1);
    param("b1", prefix + ".fc1.b", "zeros", b1);
    param("w2", prefix + ".fc2.w", "glorot_uniform", w2);
    param("b2", prefix + ".fc2.b", "zeros", vec);
    normOp(in);
    os << "    %1 = gpipe.dense %0, %w1, %b1 : (" << hidden << ", " << w1
       << ", " << b1 << ") -> " << wide << "\n";
    os << "    %2 = gpipe.gelu %1 : " << wide << "\n";
    os << "    %3 = gpipe.dense %2, %w2, %b2 : (" << wide << ", " << w2 << ", "
       << vec << ") -> " << hidden << "\n";
    dropoutAndResidual(4, in);
  }

  void writeHead() {
    std::string in = h(2 * c.blocks), w = mat(c.width, c.vocab),
                logits =
                    t(std::to_string(c.batch) + "x" + std::to_string(c.seq) +
                      "x" + std::to_string(c.vocab));
    os << "  %logits = gpipe.layer \"head\" -> " << logits << " {\n";
    normParams("head");
    param("w", "head.w", "glorot_uniform", w);
    normOp(in);
    os << "    %1 = gpipe.dense %0, %w : (" << hidden << ", " << w << ") -> "
       << logits << "\n";
    os << "    gpipe.yield %1 : " << logits << "\n";
    os << "  }\n";
    os << "  %loss = gpipe.layer \"loss\" -> tensor<f32> {\n";
    os << "    %0 = gpipe.softmax_cross_entropy %logits, %targets : (" << logits
       << ", " << tokens << ") -> tensor<f32>\n";
    os << "    gpipe.yield %0 : tensor<f32>\n";
    os << "  }\n";
  }

  const TransformerConfig &c;
  std::ostringstream os;
  std::string dropoutRate, tokens, hidden, vec;
  unsigned seed = 0;
};
} // namespace

std::string gpipe::buildTransformerModel(const TransformerConfig &config) {
  return Writer(config).write();
}
