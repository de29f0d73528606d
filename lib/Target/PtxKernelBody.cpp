//===- PtxKernelBody.cpp - A PTX kernel's computation ---------------------===//
//
// A kernel's body, emitted directly over raw pointers (the ABI of
// PtxKernels.h): a grid-stride scf.for over the flattened output, the
// output's coordinates by division, each input's flat index from them, and
// the steps' scalar arithmetic from KernelToLinalg's emitKernelSteps, the
// very definitions the CPU's kernels use; a reduction loops over the reduced
// dimensions (nested scf.for, row-major) inside a thread. No linalg: its
// parallel-loop mapping gave one thread per block.
//
//===----------------------------------------------------------------------===//

#include "PtxKernelBody.h"

#include "PtxEmit.h"

#include "gpipe/Conversion/KernelToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <functional>
#include <limits>

using namespace mlir;
using namespace gpipe;
using namespace gpipe::ptx_detail;

LogicalResult gpipe::ptx_detail::checkKernel(MLIRContext *ctx, Location loc,
                                             const NamedKernel &kernel) {
  OpBuilder b(ctx);
  Block scratch;
  SmallVector<Value> inputs;
  for (unsigned k = 0; k < kernel.spec.numInputs; ++k) {
    KernelElement element = kernel.spec.inputType(k);
    Type type = element == KernelElement::I1 ? Type(b.getI1Type())
                                             : storageType(b, element);
    inputs.push_back(scratch.addArgument(type, loc));
  }
  b.setInsertionPointToStart(&scratch);
  FailureOr<SmallVector<Value>> values =
      emitKernelSteps(b, loc, kernel.symbol, kernel.spec, inputs);
  // The ops go before the block.
  while (!scratch.empty())
    scratch.back().erase();
  return failure(failed(values));
}

/// A row kernel's body (KernelSpec::rowDims): thread `first` takes rows
/// first, first + step, ...; in each, a pass over the columns per leading
/// reduction (in column order), then one that writes the row. `indexOf(k,
/// coords)` is input k's flat index at a point, `loadInput(k, base, index)`
/// its element there, `elementAt(base, index)` an f32 element's address.
template <typename IndexOf, typename LoadInput, typename ElementAt>
static LogicalResult emitRowKernelBody(OpBuilder &b, Location loc,
                                       const NamedKernel &kernel,
                                       const BodyArgs &args, IndexOf indexOf,
                                       LoadInput loadInput,
                                       ElementAt elementAt) {
  const KernelSpec &spec = kernel.spec;
  const unsigned rows = spec.rowDims;
  Emit e{b, loc};
  Value rowCount = e.i(1);
  for (unsigned d = 0; d < rows; ++d)
    rowCount = e.muli(rowCount, args.sizes[d]);
  auto rowLoop = scf::ForOp::create(b, loc, args.first, rowCount, args.step);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(rowLoop.getBody());
  SmallVector<Value> coords(spec.rank);
  Value rest = rowLoop.getInductionVar();
  for (unsigned d = rows; d-- > 0;) {
    if (d == 0) {
      coords[0] = rest;
      break;
    }
    coords[d] = e.remui(rest, args.sizes[d]);
    rest = e.divui(rest, args.sizes[d]);
  }
  // Nested loops over the columns carrying `init`; `body` gives the next
  // values at each point (coords set).
  std::function<SmallVector<Value>(unsigned, ValueRange,
                                   function_ref<SmallVector<Value>(ValueRange)>)>
      overColumns = [&](unsigned dim, ValueRange init,
                        function_ref<SmallVector<Value>(ValueRange)> body)
      -> SmallVector<Value> {
    if (dim == spec.rank)
      return body(init);
    auto loop = scf::ForOp::create(b, loc, e.i(0), args.sizes[dim], e.i(1),
                                   init);
    OpBuilder::InsertionGuard inner(b);
    // Without values to carry the loop has its yield already.
    if (init.empty())
      b.setInsertionPoint(loop.getBody()->getTerminator());
    else
      b.setInsertionPointToStart(loop.getBody());
    coords[dim] = loop.getInductionVar();
    SmallVector<Value> next =
        overColumns(dim + 1, loop.getRegionIterArgs(), body);
    if (!init.empty())
      scf::YieldOp::create(b, loc, next);
    return SmallVector<Value>(loop.getResults());
  };
  SmallVector<Value> results;
  LogicalResult status = success();
  auto stepsHere = [&]() -> SmallVector<Value> {
    SmallVector<Value> elements;
    for (unsigned k = 0; k < spec.numInputs; ++k)
      elements.push_back(loadInput(k, args.inputs[k], indexOf(k, coords)));
    FailureOr<SmallVector<Value>> values =
        emitKernelSteps(b, loc, kernel.symbol, spec, elements, results);
    if (failed(values)) {
      status = failure();
      return elements;
    }
    return *values;
  };
  for (const KernelStep &step : ArrayRef<KernelStep>(spec.steps).drop_back()) {
    if (!isReductionStep(step.op))
      continue;
    bool max = step.op == "reduce_max";
    Value identity = e.f(max ? -std::numeric_limits<float>::infinity() : 0.0f);
    Value total = overColumns(rows, ValueRange{identity}, [&](ValueRange acc) {
      Value v = stepsHere()[step.operands[0]];
      return SmallVector<Value>{
          max ? arith::MaximumFOp::create(b, loc, acc[0], v).getResult()
              : e.add(acc[0], v)};
    })[0];
    if (step.op == "reduce_mean")
      total = e.div(total, e.f(float(step.constant("count"))));
    results.push_back(total);
  }
  overColumns(rows, ValueRange{}, [&](ValueRange) {
    Value value = toStorage(b, loc, stepsHere().back());
    Value flat = coords[0];
    for (unsigned d = 1; d < spec.rank; ++d)
      flat = e.addi(e.muli(flat, args.sizes[d]), coords[d]);
    LLVM::StoreOp::create(b, loc, value, elementAt(args.output, flat));
    return SmallVector<Value>{};
  });
  return status;
}

LogicalResult gpipe::ptx_detail::emitKernelBody(OpBuilder &b, Location loc,
                                                const NamedKernel &kernel,
                                                const BodyArgs &args) {
  const KernelSpec &spec = kernel.spec;
  Emit e{b, loc};
  Type f32 = b.getF32Type();
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());

  // A memref's own size along its i-th dimension (`dim` of the space): its
  // window's extent, or the space's size.
  auto ownSize = [&](const KernelWindow *w, size_t i, unsigned dim) {
    return w && !w->whole(i) ? e.i(w->extents[i]) : args.sizes[dim];
  };
  const KernelWindow *outWindow =
      spec.outputWindow ? &*spec.outputWindow : nullptr;
  // The output's element count, and each input's row-major strides over
  // its dimensions.
  Value count = e.i(1);
  for (auto [i, dim] : llvm::enumerate(spec.outputDims))
    count = e.muli(count, ownSize(outWindow, i, dim));
  std::vector<SmallVector<Value>> strides(spec.numInputs);
  for (unsigned k = 0; k < spec.numInputs; ++k) {
    ArrayRef<unsigned> dims = spec.inputDims[k];
    strides[k].assign(spec.rank, Value());
    Value stride = e.i(1);
    for (size_t i = dims.size(); i-- > 0;) {
      strides[k][dims[i]] = stride;
      stride = e.muli(stride, ownSize(spec.inputWindow(k), i, dims[i]));
    }
  }
  // Input k's flat index at the point `coords`, through its window.
  auto indexOf = [&](unsigned k, ArrayRef<Value> coords) {
    const KernelWindow *w = spec.inputWindow(k);
    Value index = e.i(0);
    for (auto [i, dim] : llvm::enumerate(spec.inputDims[k])) {
      Value at = coords[dim];
      if (w && !w->whole(i))
        at = e.addi(e.i(w->offsets[i]), e.muli(e.i(w->steps[i]), at));
      index = e.addi(index, e.muli(at, strides[k][dim]));
    }
    return index;
  };
  SmallVector<unsigned> reduced;
  for (unsigned dim = 0; dim < spec.rank; ++dim)
    if (!llvm::is_contained(spec.outputDims, dim))
      reduced.push_back(dim);
  const KernelStep *reduction = spec.reduces() ? &spec.steps.back() : nullptr;

  auto elementAt = [&](Value base, Value index) {
    return LLVM::GEPOp::create(b, loc, ptr, f32, base, ValueRange{index},
                               LLVM::GEPNoWrapFlags::inbounds)
        .getResult();
  };
  // Input k's element at `index` of `base`, as the steps see it.
  auto loadInput = [&](unsigned k, Value base, Value index) {
    KernelElement element = spec.inputType(k);
    Value stored = LLVM::LoadOp::create(b, loc, storageType(b, element),
                                        elementAt(base, index));
    return fromStorage(b, loc, stored, element);
  };
  if (spec.rowDims)
    return emitRowKernelBody(b, loc, kernel, args, indexOf, loadInput,
                             elementAt);

  LogicalResult result = success();
  auto loop = scf::ForOp::create(b, loc, args.first, count, args.step);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value flat = loop.getInductionVar();
  // The output's coordinates, row-major; the first needs no remainder.
  SmallVector<Value> coords(spec.rank);
  Value rest = flat;
  const size_t outRank = spec.outputDims.size();
  for (size_t i = outRank; i-- > 0;) {
    unsigned dim = spec.outputDims[i];
    if (i == 0) {
      coords[dim] = rest;
      break;
    }
    Value size = ownSize(outWindow, i, dim);
    coords[dim] = e.remui(rest, size);
    rest = e.divui(rest, size);
  }
  // An output window: the coordinates are the output's own; the point of
  // the space is (c - offset) / step where that is a point, else the
  // element is 0 (`inWindow` false).
  // A gather's gradient writes its output whole: no window test.
  const bool gatherGrad = spec.gathers() && spec.steps[0].op == "gather_grad";
  Value inWindow;
  if (outWindow && !gatherGrad)
    for (auto [i, dim] : llvm::enumerate(spec.outputDims)) {
      if (outWindow->whole(i))
        continue;
      // Signed: a coordinate before the offset is outside.
      Value shifted = e.subi(coords[dim], e.i(outWindow->offsets[i]));
      Value stepValue = e.i(outWindow->steps[i]);
      Value point = arith::DivSIOp::create(b, loc, shifted, stepValue);
      Value onLattice = e.andi(
          e.cmpi(arith::CmpIPredicate::sge, shifted, e.i(0)),
          e.cmpi(arith::CmpIPredicate::eq,
                 arith::RemSIOp::create(b, loc, shifted, stepValue), e.i(0)));
      Value inside = e.andi(
          onLattice, e.cmpi(arith::CmpIPredicate::slt, point, args.sizes[dim]));
      inWindow = inWindow ? e.andi(inWindow, inside) : inside;
      // Clamped into the space, so that the load outside stays in bounds.
      coords[dim] = e.select(inside, point, e.i(0));
    }
  // Input elements read once per output element rather than at each point
  // of a reduction: those of the inputs that lack the reduced dimensions.
  SmallVector<Value> preloaded(spec.numInputs);
  // The steps at the point `coords`.
  auto stepsHere = [&]() -> FailureOr<SmallVector<Value>> {
    SmallVector<Value> elements;
    for (unsigned k = 0; k < spec.numInputs; ++k) {
      if (preloaded[k]) {
        elements.push_back(preloaded[k]);
        continue;
      }
      ArrayRef<unsigned> dims = spec.inputDims[k];
      Value index;
      if (dims == ArrayRef<unsigned>(spec.outputDims) &&
          !spec.inputWindow(k) && !outWindow)
        index = flat;
      else
        index = indexOf(k, coords);
      elements.push_back(loadInput(k, args.inputs[k], index));
    }
    return emitKernelSteps(b, loc, kernel.symbol, spec, elements);
  };

  Value value;
  if (spec.concatenates()) {
    // The input whose part holds the point: its pointer and index chosen by
    // the axis coordinate, one load.
    const unsigned axis = unsigned(spec.steps[0].constant("axis"));
    Value axisAt = coords[axis];
    Value base = args.inputs[0], index;
    int64_t start = 0;
    SmallVector<Value> local(coords);
    for (unsigned k = 0; k < spec.numInputs; ++k) {
      local[axis] = e.subi(axisAt, e.i(start));
      Value here = indexOf(k, local);
      if (k == 0) {
        index = here;
      } else {
        Value past = e.cmpi(arith::CmpIPredicate::sge, axisAt, e.i(start));
        base = e.select(past, args.inputs[k], base);
        index = e.select(past, here, index);
      }
      start += spec.inputWindow(k)->extents[axis];
    }
    // The words as they are: every input has the output's type.
    value = LLVM::LoadOp::create(b, loc, storageType(b, spec.outputType),
                                 elementAt(base, index));
  } else if (spec.gathers()) {
    // The table's extent along the axis is a constant of the kernel.
    const unsigned axis = unsigned(spec.steps[0].constant("axis"));
    const KernelWindow *table =
        gatherGrad ? outWindow : spec.inputWindow(0);
    Value extent = e.i(table->extents[axis]);
    auto indexAt = [&](ArrayRef<Value> at) {
      return wrapIndex(b, loc, loadInput(1, args.inputs[1], indexOf(1, at)),
                       extent);
    };
    if (!gatherGrad) {
      auto [position, inRange] = indexAt(coords);
      SmallVector<Value> read(coords);
      read[axis] = position;
      Value element = loadInput(0, args.inputs[0], indexOf(0, read));
      value = e.select(inRange, element,
                       e.f(std::numeric_limits<float>::quiet_NaN()));
    } else {
      // dy's elements whose index points here, added in index order.
      auto inner = scf::ForOp::create(b, loc, e.i(0), args.sizes[axis],
                                      e.i(1), ValueRange{e.f(0.0f)});
      OpBuilder::InsertionGuard innerGuard(b);
      b.setInsertionPointToStart(inner.getBody());
      SmallVector<Value> read(coords);
      read[axis] = inner.getInductionVar();
      auto [position, inRange] = indexAt(read);
      Value hit = e.andi(inRange, e.cmpi(arith::CmpIPredicate::eq, position,
                                         coords[axis]));
      Value acc = inner.getRegionIterArg(0);
      Value dy = loadInput(0, args.inputs[0], indexOf(0, read));
      scf::YieldOp::create(b, loc, e.select(hit, e.add(acc, dy), acc));
      value = inner.getResult(0);
    }
  } else if (!reduction) {
    FailureOr<SmallVector<Value>> values = stepsHere();
    if (failed(values))
      return failure();
    value = values->back();
  } else {
    for (unsigned k = 0; k < spec.numInputs; ++k)
      if (llvm::none_of(spec.inputDims[k], [&](unsigned dim) {
            return llvm::is_contained(reduced, dim);
          })) {
        preloaded[k] = loadInput(k, args.inputs[k], indexOf(k, coords));
      }
    bool max = reduction->op == "reduce_max";
    Value identity = e.f(max ? -std::numeric_limits<float>::infinity() : 0.0f);
    // Nested loops over the reduced dimensions, outermost first.
    std::function<Value(unsigned, Value)> reduceFrom = [&](unsigned level,
                                                           Value acc) -> Value {
      if (level == reduced.size()) {
        FailureOr<SmallVector<Value>> values = stepsHere();
        if (failed(values)) {
          result = failure();
          return acc;
        }
        Value v = (*values)[reduction->operands[0]];
        return max ? arith::MaximumFOp::create(b, loc, acc, v).getResult()
                   : e.add(acc, v);
      }
      unsigned dim = reduced[level];
      auto inner = scf::ForOp::create(b, loc, e.i(0), args.sizes[dim], e.i(1),
                                      ValueRange{acc});
      OpBuilder::InsertionGuard innerGuard(b);
      b.setInsertionPointToStart(inner.getBody());
      coords[dim] = inner.getInductionVar();
      Value next = reduceFrom(level + 1, inner.getRegionIterArg(0));
      scf::YieldOp::create(b, loc, next);
      return inner.getResult(0);
    };
    value = reduceFrom(0, identity);
    if (failed(result))
      return failure();
    if (reduction->op == "reduce_mean")
      value = e.div(value, e.f(float(reduction->constant("count"))));
  }
  value = toStorage(b, loc, value);
  if (inWindow)
    value = e.select(inWindow, value,
                     arith::ConstantOp::create(
                         b, loc, b.getZeroAttr(value.getType())));
  LLVM::StoreOp::create(b, loc, value, elementAt(args.output, flat));
  return result;
}

SmallVector<Type> gpipe::ptx_detail::parameterTypes(MLIRContext *ctx,
                                                    const KernelSpec &spec) {
  SmallVector<Type> types(spec.numInputs + 1, LLVM::LLVMPointerType::get(ctx));
  types.append(spec.rank, IntegerType::get(ctx, 64));
  return types;
}
