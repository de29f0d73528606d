//===- OnnxValues.cpp - How gpipe holds an ONNX value ---------------------===//
//
// A value's layout (images channels-last, a batch merged with the next
// dimension; a moved batch is OnnxViews.cpp's), its conversion back to ONNX's
// layout where an op needs it, and a constant operand as a frozen parameter
// of the layer that reads it.
//
//===----------------------------------------------------------------------===//

#include "OnnxGraph.h"

using namespace gpipe;
using namespace gpipe::onnx_import;

std::string gpipe::onnx_import::typeOf(const Value &v) {
  if (!v.isBool)
    return tensorType(v.shape, v.isFloat);
  std::string text = "tensor<";
  for (int64_t dim : v.shape)
    text += std::to_string(dim) + "x";
  return text + "i1>";
}

std::vector<int64_t> gpipe::onnx_import::onnxShape(const Value &v) {
  const std::vector<int64_t> &s = v.shape;
  switch (v.layout) {
  case Layout::Plain:
    return s;
  case Layout::Nhwc:
    return {s[0], s[3], s[1], s[2]};
  case Layout::Pooled:
    return {s[0], s[1], 1, 1};
  case Layout::Ncl:
    return {s[0], s[3], s[2]};
  case Layout::Rows: {
    std::vector<int64_t> out = {s[0] * s[1]};
    out.insert(out.end(), s.begin() + 2, s.end());
    return out;
  }
  case Layout::Viewed: {
    std::vector<int64_t> out;
    for (const std::vector<int64_t> &group : v.viewGroups) {
      int64_t size = 1;
      for (int64_t d : group)
        size *= s[size_t(d)];
      out.push_back(size);
    }
    return out;
  }
  }
  return s;
}

void GraphImporter::bind(const std::string &name, const Value &v) {
  Value bound = v;
  bound.layer = currentLayer;
  if (!v.origin.empty()) { // the defining layer's value, held anew
    bound = values.at(v.origin);
    bound.shape = v.shape;
    bound.layout = v.layout;
    bound.viewGroups = v.viewGroups;
    bound.columnOrder.clear();
  }
  values[name] = bound;
}

bool GraphImporter::toOnnxLayout(Value &v, std::string &error) {
  if (v.layout == Layout::Plain)
    return true;
  if (v.layout == Layout::Viewed)
    return materializeView(v, error);
  if (v.layout == Layout::Rows) {
    error = "its input " + shapeText(onnxShape(v)) +
            " merges the batch with the next dimension (a Reshape to "
            "[N * S, ...]); gpipe keeps the batch in dimension 0, so only an "
            "element-wise op, a Gemm or MatMul by a weight and a Reshape "
            "back may read it";
    return false;
  }
  const std::string key = "layout:" + v.ssa;
  auto cached = layerCache.find(key);
  if (cached != layerCache.end()) {
    v = cached->second;
    return true;
  }
  const std::vector<int64_t> target = onnxShape(v);
  Value out = v;
  out.layout = Layout::Plain;
  out.shape = target;
  const std::string name = v.ssa + "#onnx";
  switch (v.layout) {
  case Layout::Nhwc:
    out.ssa = define(name, target, Layout::Plain, v.isFloat, v.isBool);
    emit(out.ssa + " = gpipe.transpose " + v.ssa + " perm [0, 3, 1, 2] : " +
         typeOf(v) + " -> " + typeOf(out));
    break;
  case Layout::Pooled:
    out.ssa = define(name, target, Layout::Plain, v.isFloat, v.isBool);
    emit(out.ssa + " = gpipe.reshape " + v.ssa + " : " + typeOf(v) + " -> " +
         typeOf(out));
    break;
  case Layout::Ncl: {
    Value rows = v;
    rows.shape = {v.shape[0], v.shape[2], v.shape[3]};
    rows.ssa = define(name + "#rows", rows.shape, Layout::Plain, v.isFloat,
                      v.isBool);
    emit(rows.ssa + " = gpipe.reshape " + v.ssa + " : " + typeOf(v) + " -> " +
         typeOf(rows));
    out.ssa = define(name, target, Layout::Plain, v.isFloat, v.isBool);
    emit(out.ssa + " = gpipe.transpose " + rows.ssa + " perm [0, 2, 1] : " +
         typeOf(rows) + " -> " + typeOf(out));
    break;
  }
  default:
    break;
  }
  out.origin = name;
  layerCache[key] = out;
  v = out;
  return true;
}

void GraphImporter::frozenConstant(const std::string &name, const Constant &c,
                                   const std::vector<int64_t> &shape,
                                   std::vector<float> data, Value &out) {
  std::string key = shape == c.dims ? name : name + shapeText(shape);
  const std::string cacheKey =
      "constant:" + key + (c.isFloat ? "" : c.isBool ? ":i1" : ":i32");
  auto cached = layerCache.find(cacheKey);
  if (cached != layerCache.end()) {
    out = cached->second;
    return;
  }
  auto owner = paramLayer.find(key);
  if (owner != paramLayer.end() && owner->second != currentLayer)
    key += "@" + layerNames[size_t(currentLayer)];
  out = Value();
  out.isConstant = true;
  out.constantName = name;
  out.constantData = data;
  out.shape = shape;
  out.ssa = param(key, shape, std::move(data), /*frozen=*/true);
  if (!c.isFloat) {
    Value cast = out;
    cast.isFloat = false;
    cast.isBool = c.isBool;
    cast.ssa = define(cacheKey, shape, Layout::Plain, false, c.isBool);
    cast.origin = cacheKey;
    emit(cast.ssa + " = gpipe.cast " + out.ssa + " : " + typeOf(out) +
         " -> " + typeOf(cast));
    out = cast;
  }
  layerCache[cacheKey] = out;
}
