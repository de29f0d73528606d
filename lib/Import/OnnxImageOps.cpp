//===- OnnxImageOps.cpp - ONNX's image ops as gpipe ops -------------------===//
//
// Convolutions, pools and batch norm over images held channels-last: a 2-D
// node's [N, C, H, W] as [N, H, W, C], a 1-D node's [N, C, L] as the image
// [N, 1, L, C] (its attributes read as those of a window of height 1).
//
//===----------------------------------------------------------------------===//

#include "NodeConverter.h"

#include <algorithm>

using namespace gpipe;
using namespace gpipe::onnx_import;

std::vector<int64_t> NodeConverter::planar(const std::vector<int64_t> &v,
                                           int64_t fill) {
  if (v.size() == 1)
    return {fill, v[0]};
  if (v.size() == 2 && g.value(input(0)) &&
      g.value(input(0))->layout == Layout::Ncl)
    return {fill, v[0], fill, v[1]}; // 1-D pads [begin, end]
  return v;
}

bool NodeConverter::window(const std::vector<int64_t> &kernel, int64_t height,
                           int64_t width, std::vector<int64_t> &stride,
                           std::vector<int64_t> &pad) {
  stride = planar(g.intsAttr("strides"), 1);
  if (stride.empty())
    stride = {1, 1};
  const std::string autoPad = g.stringAttr("auto_pad", "NOTSET");
  std::vector<int64_t> pads = planar(g.intsAttr("pads"), 0);
  if (pads.empty() || autoPad == "VALID")
    pads = {0, 0, 0, 0};
  if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    // The output has ceil(in / stride) pixels; gpipe pads both sides alike,
    // which is ONNX's padding when the total is even.
    const int64_t in[2] = {height, width};
    for (int d = 0; d < 2; ++d) {
      const int64_t out = (in[d] + stride[size_t(d)] - 1) / stride[size_t(d)];
      const int64_t total = std::max<int64_t>(
          (out - 1) * stride[size_t(d)] + kernel[size_t(d)] - in[d], 0);
      if (total % 2) {
        error = "attribute auto_pad = " + autoPad + " pads dimension " +
                std::to_string(d) + " unevenly (" + std::to_string(total) +
                " in all), which gpipe does not support";
        return false;
      }
      pads[size_t(d)] = pads[size_t(d) + 2] = total / 2;
    }
  } else if (autoPad != "NOTSET" && autoPad != "VALID") {
    error = "attribute auto_pad = " + autoPad + " is not supported";
    return false;
  }
  if (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3]) {
    error = "attribute pads = " + shapeText(g.intsAttr("pads")) +
            " is not supported (only the same padding on both sides)";
    return false;
  }
  pad = {pads[0], pads[1]};
  if (height + 2 * pad[0] < kernel[0] || width + 2 * pad[1] < kernel[1]) {
    error = "the window " + shapeText(kernel) +
            " is larger than the padded "
            "input " +
            shapeText({height + 2 * pad[0], width + 2 * pad[1]});
    return false;
  }
  return true;
}

std::string NodeConverter::conv() {
  const Value *x;
  std::string xs = activation(0, x);
  if (xs.empty())
    return error;
  const Constant *w = weight(1);
  if (!w)
    return error;
  const bool oneD = x->layout == Layout::Ncl;
  if (!isImage(x->layout) || w->dims.size() != (oneD ? 3u : 4u))
    return unsupported("only 1-D and 2-D convolutions of [N, C, L] and [N, "
                       "C, H, W] inputs are supported; input 0 has shape " +
                       shapeText(x->shape));
  for (int64_t d : g.intsAttr("dilations"))
    if (d != 1)
      return unsupported(
          "attribute dilations = " + shapeText(g.intsAttr("dilations")) +
          " is not supported (only 1)");
  const int64_t groups = g.intAttr("group", 1);
  const int64_t f = w->dims[0], c = w->dims[1], kh = oneD ? 1 : w->dims[2],
                kw = w->dims.back();
  if (groups < 1 || c * groups != x->shape[3] || f % groups)
    return unsupported("input 0 has " + std::to_string(x->shape[3]) +
                       " channels, the weight " + shapeText(w->dims) + " in " +
                       std::to_string(groups) + " groups");
  std::vector<int64_t> stride, pad;
  if (!window({kh, kw}, x->shape[1], x->shape[2], stride, pad))
    return error;
  // [F, C, KH, KW] -> [KH, KW, C, F]
  std::vector<float> weights(w->floats.size());
  for (int64_t o = 0; o < f; ++o)
    for (int64_t i = 0; i < c; ++i)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t xx = 0; xx < kw; ++xx)
          weights[size_t(((y * kw + xx) * c + i) * f + o)] =
              w->floats[size_t(((o * c + i) * kh + y) * kw + xx)];
  std::string operands = xs + ", " + param(1, {kh, kw, c, f}, weights);
  if (!error.empty())
    return error;
  std::string types =
      tensorType(x->shape, true) + ", " + tensorType({kh, kw, c, f}, true);
  const Constant *bias = n.input_size() > 2 && !input(2).empty()
                             ? g.constant(input(2))
                             : nullptr;
  // The dynamo exporter spells a convolution without bias with a computed
  // zero bias (Expand(CastLike(0, x), Shape(W)[0:1])).
  const bool zeroBias =
      bias && !g.isInitializer(input(2)) && bias->isFloat &&
      std::all_of(bias->floats.begin(), bias->floats.end(),
                  [](float v) { return v == 0.0f; });
  if (n.input_size() > 2 && !input(2).empty() && !zeroBias) {
    const Constant *b = weight(2);
    if (!b)
      return error;
    operands += ", " + param(2, {f}, b->floats);
    if (!error.empty())
      return error;
    types += ", " + tensorType({f}, true);
  }
  std::vector<int64_t> shape = {
      x->shape[0], (x->shape[1] + 2 * pad[0] - kh) / stride[0] + 1,
      (x->shape[2] + 2 * pad[1] - kw) / stride[1] + 1, f};
  std::string y = g.define(n.output(0), shape, x->layout);
  g.emit(y + " = gpipe.conv2d " + operands + " stride " + shapeText(stride) +
         " padding " + shapeText(pad) +
         (groups != 1 ? " groups " + std::to_string(groups) : "") + " : (" +
         types + ") -> " + tensorType(shape, true));
  return {};
}

std::string NodeConverter::pool(bool max) {
  const Value *x;
  std::string xs = activation(0, x);
  if (xs.empty())
    return error;
  if (!isImage(x->layout))
    return unsupported("only 1-D and 2-D pooling of [N, C, L] and [N, C, H, "
                       "W] inputs is supported; input 0 has shape " +
                       shapeText(x->shape));
  if (!onlyFirstOutputUsed())
    return unsupported("its Indices output is not supported");
  if (g.intAttr("ceil_mode", 0) != 0)
    return unsupported("attribute ceil_mode = 1 is not supported");
  for (int64_t d : g.intsAttr("dilations"))
    if (d != 1)
      return unsupported(
          "attribute dilations = " + shapeText(g.intsAttr("dilations")) +
          " is not supported (only 1)");
  if (g.intAttr("storage_order", 0) != 0)
    return unsupported("attribute storage_order = 1 is not supported");
  std::vector<int64_t> kernel = planar(g.intsAttr("kernel_shape"), 1);
  if (kernel.size() != 2)
    return unsupported(
        "attribute kernel_shape = " + shapeText(g.intsAttr("kernel_shape")) +
        " is not 1-D or 2-D");
  std::vector<int64_t> stride, pad;
  if (!window(kernel, x->shape[1], x->shape[2], stride, pad))
    return error;
  if (pad[0] >= kernel[0] || pad[1] >= kernel[1])
    return unsupported("attribute pads = " + shapeText(g.intsAttr("pads")) +
                       " is not supported (only padding smaller than the "
                       "window)");
  if (!max && g.intAttr("count_include_pad", 0) != 0 && (pad[0] || pad[1]))
    return unsupported("attribute count_include_pad = 1 is not supported "
                       "(gpipe's mean leaves padding out)");
  const std::vector<int64_t> &window = kernel;
  std::vector<int64_t> shape = {
      x->shape[0], (x->shape[1] + 2 * pad[0] - window[0]) / stride[0] + 1,
      (x->shape[2] + 2 * pad[1] - window[1]) / stride[1] + 1, x->shape[3]};
  std::string y = g.define(n.output(0), shape, x->layout);
  g.emit(y + (max ? " = gpipe.max_pool2d " : " = gpipe.avg_pool2d ") + xs +
         " window " + shapeText(window) + " stride " + shapeText(stride) +
         " padding " + shapeText(pad) + " : (" + tensorType(x->shape, true) +
         ") -> " + tensorType(shape, true));
  return {};
}

std::string NodeConverter::globalAveragePool() {
  const Value *x;
  std::string xs = activation(0, x);
  if (xs.empty())
    return error;
  if (!isImage(x->layout))
    return unsupported("only [N, C, L] and [N, C, H, W] inputs are "
                       "supported");
  std::vector<int64_t> shape = {x->shape[0], x->shape[3]};
  std::string y = g.define(n.output(0), shape, Layout::Pooled);
  g.emit(y + " = gpipe.global_avg_pool " + xs + " : (" +
         tensorType(x->shape, true) + ") -> " + tensorType(shape, true));
  return {};
}

std::string NodeConverter::batchNorm() {
  const Value *x;
  std::string xs = activation(0, x);
  if (xs.empty())
    return error;
  if (g.intAttr("training_mode", 0) != 0)
    return unsupported("attribute training_mode = 1 is not supported (gpipe "
                       "trains with batch statistics on its own)");
  if (!onlyFirstOutputUsed())
    return unsupported("its running-statistics outputs are not supported");
  if (x->layout == Layout::Plain && x->shape.size() != 2)
    return unsupported("input 0 has shape " + shapeText(x->shape) +
                       "; gpipe normalises [N, C], [N, C, L] or [N, C, H, W]");
  const int64_t channels = x->shape.back();
  std::string operands = xs, types = tensorType(x->shape, true);
  for (int i = 1; i <= 4; ++i) {
    const Constant *c = weight(i);
    if (!c)
      return error;
    if (c->dims != std::vector<int64_t>{channels})
      return unsupported("input " + std::to_string(i) + " has shape " +
                         shapeText(c->dims) + ", expected [" +
                         std::to_string(channels) + "]");
    operands += ", " + param(i, {channels}, c->floats);
    if (!error.empty())
      return error;
    types += ", " + tensorType({channels}, true);
  }
  // ONNX: running = momentum running + (1 - momentum) batch; gpipe the
  // other way round.
  const double momentum = 1.0 - double(g.floatAttr("momentum", 0.9f));
  std::string y = g.define(n.output(0), x->shape, x->layout);
  g.emit(y + " = gpipe.batch_norm " + operands +
         " {epsilon = " + number(g.floatAttr("epsilon", 1e-5f)) +
         " : f64, momentum = " + number(momentum) + " : f64} : (" + types +
         ") -> " + tensorType(x->shape, true));
  return {};
}
