//===- OnnxFoldShapes.cpp - Folding shapes, layouts and indexing ---------===//
//
// The folder's ops that move or select elements rather than compute them:
// Shape, ConstantOfShape, Range, Expand, Reshape, Squeeze/Unsqueeze,
// Transpose, Concat, Split, Slice, Gather, GatherElements, Tile, Trilu,
// CumSum, the reductions and MatMul, on constants held as long double.
//
//===----------------------------------------------------------------------===//

#include "OnnxFolder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

using namespace gpipe;
using namespace gpipe::onnx_import;
using namespace gpipe::onnx_import::folding;

bool Folder::shape(std::vector<Tensor> &out) {
  const Value *v = g.value(n.input(0));
  std::vector<int64_t> dims;
  if (v)
    dims = onnxShape(*v);
  else
    dims = g.constant(n.input(0))->dims;
  Tensor t;
  t.kind = Kind::Int;
  if (n.op_type() == "Size") {
    int64_t total = 1;
    for (int64_t d : dims)
      if (__builtin_mul_overflow(total, d, &total))
        return fail("its input's element count overflows int64");
    t.v = {(long double)total};
    out.push_back(t);
    return true;
  }
  const int64_t rank = int64_t(dims.size());
  int64_t start = std::clamp<int64_t>(intAttr("start", 0), -rank, rank);
  int64_t end = std::clamp<int64_t>(intAttr("end", rank), -rank, rank);
  start += start < 0 ? rank : 0;
  end += end < 0 ? rank : 0;
  for (int64_t i = start; i < end; ++i)
    t.v.push_back((long double)dims[size_t(i)]);
  t.dims = {int64_t(t.v.size())};
  out.push_back(t);
  return true;
}

bool Folder::constantOfShape(Tensor &out) {
  std::vector<int64_t> dims = ints(0);
  if (!checkSize(dims))
    return false;
  Tensor fill;
  fill.v = {0};
  if (const onnx::AttributeProto *value = attr("value")) {
    Constant c;
    std::string why = readTensor(value->t(), c);
    if (!why.empty())
      return fail("its value: " + why);
    if (c.count() != 1)
      return fail("its value has " + std::to_string(c.count()) +
                  " elements; ONNX gives it one");
    fill = fromConstant(c);
  }
  out.dims = dims;
  out.kind = fill.kind;
  out.v.assign(size_t(out.count()), fill.v[0]);
  return true;
}

bool Folder::range(Tensor &out) {
  for (int i = 0; i < 3; ++i)
    if (in[size_t(i)].count() != 1)
      return fail("input " + std::to_string(i) + " is not a scalar");
  const long double start = in[0].v[0], limit = in[1].v[0],
                    delta = in[2].v[0];
  if (delta == 0)
    return fail("its delta is 0");
  const long double steps = std::ceil((limit - start) / delta);
  // Checked before the conversion to int64, which a NaN (from infinite
  // bounds) or a count past int64's range would make undefined.
  if (std::isnan(steps))
    return fail("its start, limit and delta give no number of elements");
  if (steps > (long double)kMaxFolded) {
    char count[32];
    std::snprintf(count, sizeof count, "%.4Lg", steps);
    return fail(std::string("its result [") + count +
                "] is larger than the importer folds (2^26 elements)");
  }
  const int64_t count = steps > 0 ? int64_t(steps) : 0;
  if (!checkSize({count}))
    return false;
  out.kind = in[0].kind;
  out.dims = {count};
  for (int64_t i = 0; i < count; ++i)
    out.v.push_back(convert(start + delta * i, out.kind));
  return true;
}

bool Folder::expand(Tensor &out) {
  std::vector<int64_t> target = ints(1);
  const Tensor x = in[0];
  in = {x};
  // Broadcast against a tensor of the target's shape (size-1 target
  // dimensions keep the input's size, as Expand's rule is NumPy's).
  for (int64_t d : target)
    if (d < 0)
      return fail("its shape " + shapeText(target) + " has a negative size");
  if (!checkSize(target)) // before the stand-in is allocated
    return false;
  Tensor ones;
  ones.dims = target;
  ones.v.assign(size_t(ones.count()), 0);
  in.push_back(ones);
  if (!elementwise(x.kind, [](const long double *a) { return a[0]; }))
    return false;
  out = result;
  return true;
}

bool Folder::reshape(const std::vector<int64_t> &target, bool allowZero,
                     Tensor &out) {
  std::vector<int64_t> dims = reshaped(in[0].dims, target, allowZero);
  if (dims.empty() && !target.empty())
    return fail("its shape " + shapeText(target) + " does not apply to " +
                shapeText(in[0].dims));
  out = in[0];
  out.dims = dims;
  return true;
}

bool Folder::squeeze(bool unsqueeze, Tensor &out) {
  std::vector<int64_t> axes = axesOf(1, 13);
  std::vector<int64_t> dims = in[0].dims;
  if (unsqueeze) {
    const int64_t rank = int64_t(dims.size() + axes.size());
    for (int64_t &a : axes)
      if (!normalize(a, rank))
        return false;
    std::sort(axes.begin(), axes.end());
    for (int64_t a : axes)
      dims.insert(dims.begin() + std::min<int64_t>(a, int64_t(dims.size())),
                  1);
  } else {
    const int64_t rank = int64_t(dims.size());
    std::vector<bool> drop(dims.size(), false);
    for (int64_t a : axes) {
      if (!normalize(a, rank))
        return false;
      if (dims[size_t(a)] != 1)
        return fail("it squeezes axis " + std::to_string(a) + " of size " +
                    std::to_string(dims[size_t(a)]));
      drop[size_t(a)] = true;
    }
    std::vector<int64_t> kept;
    for (size_t i = 0; i < dims.size(); ++i)
      if (!(axes.empty() ? dims[i] == 1 : bool(drop[i])))
        kept.push_back(dims[i]);
    dims = kept;
  }
  out = in[0];
  out.dims = dims;
  return true;
}

bool Folder::transpose(Tensor &out) {
  const Tensor &x = in[0];
  const int64_t rank = x.rank();
  std::vector<int64_t> perm = intsAttr("perm");
  if (perm.empty())
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  if (!isPermutation(perm, rank))
      return fail("attribute perm " + shapeText(perm) +
                  " is not a permutation of " + std::to_string(rank) +
                  " axes");
  std::vector<int64_t> inStrides = strides(x.dims);
  out.kind = x.kind;
  for (int64_t p : perm)
    out.dims.push_back(x.dims[size_t(p)]);
  out.v.resize(x.v.size());
  std::vector<int64_t> index(size_t(rank), 0);
  for (size_t e = 0; e < out.v.size(); ++e) {
    int64_t source = 0;
    for (int64_t d = 0; d < rank; ++d)
      source += index[size_t(d)] * inStrides[size_t(perm[size_t(d)])];
    out.v[e] = x.v[size_t(source)];
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++index[size_t(d)] < out.dims[size_t(d)])
        break;
      index[size_t(d)] = 0;
    }
  }
  return true;
}

bool Folder::concat(Tensor &out) {
  int64_t axis = intAttr("axis", 0);
  const int64_t rank = in[0].rank();
  if (!normalize(axis, rank))
    return false;
  out.dims = in[0].dims;
  out.dims[size_t(axis)] = 0;
  out.kind = in[0].kind;
  for (const Tensor &t : in) {
    if (t.kind == Kind::Float)
      out.kind = Kind::Float;
    if (t.rank() != rank)
      return fail("its inputs have ranks " + std::to_string(rank) + " and " +
                  std::to_string(t.rank()));
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && t.dims[size_t(d)] != in[0].dims[size_t(d)])
        return fail("its inputs " + shapeText(in[0].dims) + " and " +
                    shapeText(t.dims) + " differ outside axis " +
                    std::to_string(axis));
    out.dims[size_t(axis)] += t.dims[size_t(axis)];
  }
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= out.dims[size_t(d)];
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor &t : in) {
      const int64_t block = t.count() / std::max<int64_t>(outer, 1);
      out.v.insert(out.v.end(), t.v.begin() + o * block,
                   t.v.begin() + (o + 1) * block);
    }
  return true;
}

bool Folder::split(std::vector<Tensor> &outs) {
  const Tensor &x = in[0];
  int64_t axis = intAttr("axis", 0);
  if (!normalize(axis, x.rank()))
    return false;
  std::vector<int64_t> sizes =
      g.opset >= 13 ? (has(1) ? ints(1) : std::vector<int64_t>())
                    : intsAttr("split");
  const int64_t parts = n.output_size(), extent = x.dims[size_t(axis)];
  if (!splitSizes(sizes, extent, parts))
    return fail("its split sizes " + shapeText(sizes) + " do not divide " +
                std::to_string(extent) + " into " + std::to_string(parts) +
                " outputs");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.dims[size_t(d)];
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    inner *= x.dims[size_t(d)];
  int64_t offset = 0;
  for (int64_t size : sizes) {
    Tensor t;
    t.kind = x.kind;
    t.dims = x.dims;
    t.dims[size_t(axis)] = size;
    for (int64_t o = 0; o < outer; ++o) {
      auto begin = x.v.begin() + (o * extent + offset) * inner;
      t.v.insert(t.v.end(), begin, begin + size * inner);
    }
    offset += size;
    outs.push_back(t);
  }
  return true;
}

bool Folder::slice(Tensor &out) {
  const Tensor &x = in[0];
  const int64_t rank = x.rank();
  std::vector<int64_t> starts = ints(1), ends = ints(2), axes, steps;
  if (has(3))
    axes = ints(3);
  else
    for (int64_t i = 0; i < int64_t(starts.size()); ++i)
      axes.push_back(i);
  steps = has(4) ? ints(4) : std::vector<int64_t>(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return fail("its starts, ends, axes and steps differ in length");
  std::vector<int64_t> first(size_t(rank), 0), step(size_t(rank), 1),
      dims = x.dims;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = axes[i];
    if (!normalize(axis, rank))
      return false;
    const int64_t extent = x.dims[size_t(axis)], s = steps[i];
    if (s == 0)
      return fail("a step is 0");
    int64_t b = starts[i], e = ends[i];
    b += b < 0 ? extent : 0;
    e += e < 0 ? extent : 0;
    if (s > 0) {
      b = std::clamp<int64_t>(b, 0, extent);
      e = std::clamp<int64_t>(e, 0, extent);
      dims[size_t(axis)] = e > b ? (e - b + s - 1) / s : 0;
    } else if (extent == 0) {
      dims[size_t(axis)] = 0;
    } else {
      b = std::clamp<int64_t>(b, 0, extent - 1);
      e = std::clamp<int64_t>(e, -1, extent - 1);
      dims[size_t(axis)] = b > e ? (b - e - s - 1) / -s : 0;
    }
    first[size_t(axis)] = b;
    step[size_t(axis)] = s;
  }
  out.kind = x.kind;
  out.dims = dims;
  std::vector<int64_t> inStrides = strides(x.dims), index(size_t(rank), 0);
  const int64_t total = out.count();
  for (int64_t e = 0; e < total; ++e) {
    int64_t source = 0;
    for (int64_t d = 0; d < rank; ++d)
      source += (first[size_t(d)] + index[size_t(d)] * step[size_t(d)]) *
                inStrides[size_t(d)];
    out.v.push_back(x.v[size_t(source)]);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++index[size_t(d)] < dims[size_t(d)])
        break;
      index[size_t(d)] = 0;
    }
  }
  return true;
}

bool Folder::gather(Tensor &out) {
  const Tensor &x = in[0], &indices = in[1];
  int64_t axis = intAttr("axis", 0);
  if (!normalize(axis, x.rank()))
    return false;
  const int64_t extent = x.dims[size_t(axis)];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.dims[size_t(d)];
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    inner *= x.dims[size_t(d)];
  out.kind = x.kind;
  out.dims.assign(x.dims.begin(), x.dims.begin() + axis);
  out.dims.insert(out.dims.end(), indices.dims.begin(), indices.dims.end());
  out.dims.insert(out.dims.end(), x.dims.begin() + axis + 1, x.dims.end());
  if (!checkSize(out.dims))
    return false;
  for (int64_t o = 0; o < outer; ++o)
    for (long double raw : indices.v) {
      int64_t i = int64_t(raw);
      if (i < -extent || i >= extent)
        return fail("index " + std::to_string(i) + " is outside [" +
                    std::to_string(-extent) + ", " + std::to_string(extent) +
                    ")");
      i += i < 0 ? extent : 0;
      auto begin = x.v.begin() + (o * extent + i) * inner;
      out.v.insert(out.v.end(), begin, begin + inner);
    }
  return true;
}

bool Folder::gatherElements(Tensor &out) {
  const Tensor &x = in[0], &indices = in[1];
  int64_t axis = intAttr("axis", 0);
  if (!normalize(axis, x.rank()))
    return false;
  if (indices.rank() != x.rank())
    return fail("its indices have rank " + std::to_string(indices.rank()) +
                ", its data " + std::to_string(x.rank()));
  out.kind = x.kind;
  out.dims = indices.dims;
  std::vector<int64_t> xStrides = strides(x.dims), index(x.dims.size(), 0);
  const int64_t extent = x.dims[size_t(axis)];
  for (size_t e = 0; e < indices.v.size(); ++e) {
    int64_t source = 0;
    for (int64_t d = 0; d < x.rank(); ++d) {
      int64_t at = index[size_t(d)];
      if (d == axis) {
        at = toInt64(indices.v[e]);
        if (at < -extent || at >= extent)
          return fail("index " + std::to_string(at) + " is outside [" +
                      std::to_string(-extent) + ", " +
                      std::to_string(extent) + ")");
        at += at < 0 ? extent : 0;
      } else if (at >= x.dims[size_t(d)]) {
        return fail("its indices " + shapeText(indices.dims) +
                    " exceed its data " + shapeText(x.dims));
      }
      source += at * xStrides[size_t(d)];
    }
    out.v.push_back(x.v[size_t(source)]);
    for (int64_t d = indices.rank() - 1; d >= 0; --d) {
      if (++index[size_t(d)] < indices.dims[size_t(d)])
        break;
      index[size_t(d)] = 0;
    }
  }
  return true;
}

bool Folder::gatherND(Tensor &out) {
  const Tensor &x = in[0], &indices = in[1];
  const int64_t batchDims = intAttr("batch_dims", 0);
  if (indices.rank() < 1 || batchDims < 0 ||
      batchDims >= std::min(x.rank(), indices.rank()))
    return fail("batch_dims " + std::to_string(batchDims) +
                " must be below both ranks (data " + shapeText(x.dims) +
                ", indices " + shapeText(indices.dims) + ")");
  const int64_t depth = indices.dims.back();
  if (depth < 1 || depth > x.rank() - batchDims)
    return fail("its indices' last dimension " + std::to_string(depth) +
                " must be in [1, " + std::to_string(x.rank() - batchDims) +
                "] for data " + shapeText(x.dims));
  for (int64_t d = 0; d < batchDims; ++d)
    if (x.dims[size_t(d)] != indices.dims[size_t(d)])
      return fail("its data " + shapeText(x.dims) + " and indices " +
                  shapeText(indices.dims) + " differ in batch dimension " +
                  std::to_string(d));
  out.kind = x.kind;
  out.dims.assign(indices.dims.begin(), indices.dims.end() - 1);
  out.dims.insert(out.dims.end(), x.dims.begin() + batchDims + depth,
                  x.dims.end());
  if (!checkSize(out.dims))
    return false;
  int64_t batches = 1, slice = 1;
  for (int64_t d = 0; d < batchDims; ++d)
    batches *= x.dims[size_t(d)];
  for (int64_t d = batchDims + depth; d < x.rank(); ++d)
    slice *= x.dims[size_t(d)];
  const int64_t tuples = batches == 0 ? 0 : indices.count() / depth / batches;
  const std::vector<int64_t> xStrides = strides(x.dims);
  for (int64_t b = 0; b < batches; ++b) {
    // Batch b's offset in the data: its index over the batch dimensions.
    int64_t base = 0, rest = b;
    for (int64_t d = batchDims - 1; d >= 0; --d) {
      base += (rest % x.dims[size_t(d)]) * xStrides[size_t(d)];
      rest /= x.dims[size_t(d)];
    }
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t source = base;
      for (int64_t k = 0; k < depth; ++k) {
        const int64_t extent = x.dims[size_t(batchDims + k)];
        int64_t at = toInt64(indices.v[size_t((b * tuples + t) * depth + k)]);
        if (at < -extent || at >= extent)
          return fail("index " + std::to_string(at) + " is outside [" +
                      std::to_string(-extent) + ", " +
                      std::to_string(extent) + ")");
        source += (at < 0 ? at + extent : at) *
                  xStrides[size_t(batchDims + k)];
      }
      out.v.insert(out.v.end(), x.v.begin() + source,
                   x.v.begin() + source + slice);
    }
  }
  return true;
}

bool Folder::tile(Tensor &out) {
  const Tensor &x = in[0];
  std::vector<int64_t> repeats = ints(1);
  if (int64_t(repeats.size()) != x.rank())
    return fail("its repeats " + shapeText(repeats) + " do not match rank " +
                std::to_string(x.rank()));
  out.kind = x.kind;
  for (int64_t d = 0; d < x.rank(); ++d)
    out.dims.push_back(x.dims[size_t(d)] * repeats[size_t(d)]);
  if (!checkSize(out.dims))
    return false;
  std::vector<int64_t> inStrides = strides(x.dims), index(x.dims.size(), 0);
  const int64_t total = out.count();
  for (int64_t e = 0; e < total; ++e) {
    int64_t source = 0;
    for (size_t d = 0; d < x.dims.size(); ++d)
      source += (index[d] % x.dims[d]) * inStrides[d];
    out.v.push_back(x.v[size_t(source)]);
    for (int64_t d = x.rank() - 1; d >= 0; --d) {
      if (++index[size_t(d)] < out.dims[size_t(d)])
        break;
      index[size_t(d)] = 0;
    }
  }
  return true;
}

bool Folder::trilu(Tensor &out) {
  const Tensor &x = in[0];
  if (x.rank() < 2)
    return fail("its input has rank " + std::to_string(x.rank()) +
                "; Trilu takes matrices");
  const int64_t k = has(1) ? ints(1)[0] : 0;
  const bool upper = intAttr("upper", 1) != 0;
  const int64_t rows = x.dims[size_t(x.rank() - 2)],
                cols = x.dims[size_t(x.rank() - 1)];
  out = x;
  for (size_t e = 0; e < out.v.size(); ++e) {
    const int64_t j = int64_t(e) % cols, i = (int64_t(e) / cols) % rows;
    const bool keep = upper ? j - i >= k : j - i <= k;
    if (!keep)
      out.v[e] = 0;
  }
  return true;
}

bool Folder::cumsum(Tensor &out) {
  const Tensor &x = in[0];
  int64_t axis = ints(1)[0];
  if (!normalize(axis, x.rank()))
    return false;
  const bool exclusive = intAttr("exclusive", 0) != 0,
             reverse = intAttr("reverse", 0) != 0;
  const int64_t extent = x.dims[size_t(axis)];
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    inner *= x.dims[size_t(d)];
  const int64_t outer = x.count() / std::max<int64_t>(extent * inner, 1);
  out = x;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < inner; ++c) {
      long double sum = 0;
      for (int64_t step = 0; step < extent; ++step) {
        const int64_t i = reverse ? extent - 1 - step : step;
        const size_t at = size_t((o * extent + i) * inner + c);
        const long double value = x.v[at];
        if (!exclusive)
          sum += value;
        out.v[at] = convert(sum, x.kind);
        if (exclusive)
          sum += value;
      }
    }
  return true;
}

bool Folder::reduce(Tensor &out) {
  const Tensor &x = in[0];
  const std::string &op = n.op_type();
  std::vector<int64_t> axes = axesOf(1, op == "ReduceSum" ? 13 : 18);
  const bool keep = intAttr("keepdims", 1) != 0;
  if (axes.empty() && intAttr("noop_with_empty_axes", 0) != 0) {
    out = x;
    return true;
  }
  std::vector<bool> reduced(x.dims.size(), axes.empty());
  for (int64_t a : axes) {
    if (!normalize(a, x.rank()))
      return false;
    reduced[size_t(a)] = true;
  }
  std::vector<int64_t> keptDims;
  for (size_t d = 0; d < x.dims.size(); ++d)
    keptDims.push_back(reduced[d] ? 1 : x.dims[d]);
  Tensor acc;
  acc.dims = keptDims;
  const bool isMax = op == "ReduceMax", isMin = op == "ReduceMin",
             isProd = op == "ReduceProd";
  acc.v.assign(size_t(acc.count()),
               isMax   ? -INFINITY
               : isMin ? INFINITY
               : isProd ? 1
                        : 0);
  std::vector<int64_t> sources = broadcastSources(keptDims, x.dims);
  for (size_t e = 0; e < x.v.size(); ++e) {
    long double &a = acc.v[size_t(sources[e])];
    const long double v = x.v[e];
    a = isMax ? std::max(a, v) : isMin ? std::min(a, v) : isProd ? a * v : a + v;
  }
  const int64_t count = x.count() / std::max<int64_t>(acc.count(), 1);
  out.kind = x.kind;
  for (long double a : acc.v)
    out.v.push_back(convert(op == "ReduceMean" ? a / count : a, x.kind));
  for (size_t d = 0; d < keptDims.size(); ++d)
    if (!reduced[d] || keep)
      out.dims.push_back(keptDims[d]);
  return true;
}

bool Folder::matmul(Tensor &out) {
  Tensor a = in[0], b = in[1];
  const bool vectorA = a.rank() == 1, vectorB = b.rank() == 1;
  if (vectorA)
    a.dims.insert(a.dims.begin(), 1);
  if (vectorB)
    b.dims.push_back(1);
  const int64_t m = a.dims[a.dims.size() - 2], k = a.dims.back(),
                nCols = b.dims.back();
  if (b.dims[b.dims.size() - 2] != k)
    return fail("its operands " + shapeText(in[0].dims) + " and " +
                shapeText(in[1].dims) + " do not contract");
  std::vector<int64_t> batchA(a.dims.begin(), a.dims.end() - 2),
      batchB(b.dims.begin(), b.dims.end() - 2);
  // The batch dimensions broadcast as element-wise shapes do.
  Tensor ta, tb;
  ta.dims = batchA;
  tb.dims = batchB;
  ta.v.assign(size_t(ta.count()), 0);
  tb.v.assign(size_t(tb.count()), 0);
  std::vector<Tensor> saved = in;
  in = {ta, tb};
  if (!elementwise(Kind::Int, [](const long double *) { return 0.0L; }))
    return false;
  std::vector<int64_t> batch = result.dims;
  in = saved;
  std::vector<int64_t> srcA = broadcastSources(batchA, batch),
                       srcB = broadcastSources(batchB, batch);
  out.kind = a.kind == Kind::Float || b.kind == Kind::Float ? Kind::Float
                                                            : Kind::Int;
  out.dims = batch;
  out.dims.push_back(m);
  out.dims.push_back(nCols);
  if (!checkSize(out.dims))
    return false;
  for (size_t p = 0; p < srcA.size(); ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < nCols; ++j) {
        long double sum = 0;
        for (int64_t l = 0; l < k; ++l)
          sum += a.v[size_t(srcA[p] * m * k + i * k + l)] *
                 b.v[size_t(srcB[p] * k * nCols + l * nCols + j)];
        out.v.push_back(convert(sum, out.kind));
      }
  if (vectorB)
    out.dims.pop_back();
  if (vectorA)
    out.dims.erase(out.dims.end() - (vectorB ? 1 : 2));
  return true;
}

