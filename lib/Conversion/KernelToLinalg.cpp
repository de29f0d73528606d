//===- KernelToLinalg.cpp - A fused element-wise kernel as linalg ---------===//
//
// The kernel's function: one linalg.generic over the iteration space (a
// reduction's output filled first, a mean's divided after), or for a
// concat a copy per input, for a gather one generic reading the table
// (its gradient a loop nest adding into the output), for a row kernel a
// loop nest over the rows with a generic per leading reduction. The steps'
// scalar bodies are KernelSteps.cpp's; the checks, KernelSpec.cpp's.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Conversion/KernelToLinalg.h"

#include "KernelInternals.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"

#include <limits>

using namespace mlir;
using namespace gpipe;
using namespace gpipe::kernel_detail;

/// A concat's body (checkConcat): input k copied into the output's part
/// after inputs 0..k-1 along the axis, each copy a generic of its own.
static void buildConcat(OpBuilder &b, Location loc, const KernelSpec &kernel,
                        ValueRange args) {
  const unsigned axis = unsigned(kernel.steps[0].constant("axis"));
  AffineMap identity = b.getMultiDimIdentityMap(kernel.rank);
  SmallVector<utils::IteratorType> parallel(kernel.rank,
                                            utils::IteratorType::parallel);
  Value output = args.back();
  int64_t at = 0;
  for (unsigned k = 0; k < kernel.numInputs; ++k) {
    SmallVector<OpFoldResult> offsets, sizes, strides;
    for (unsigned d = 0; d < kernel.rank; ++d) {
      offsets.push_back(b.getIndexAttr(d == axis ? at : 0));
      sizes.push_back(
          tensor::DimOp::create(b, loc, args[k], int64_t(d)).getResult());
      strides.push_back(b.getIndexAttr(1));
    }
    Value part = tensor::ExtractSliceOp::create(b, loc, output, offsets, sizes,
                                                strides);
    auto copy = linalg::GenericOp::create(
        b, loc, TypeRange{part.getType()}, ValueRange{args[k]}, part,
        ArrayRef<AffineMap>{identity, identity}, parallel,
        [&](OpBuilder &nested, Location nestedLoc, ValueRange elems) {
          linalg::YieldOp::create(nested, nestedLoc, elems[0]);
        });
    copy->setAttr("gpipe.tile", b.getUnitAttr());
    output = tensor::InsertSliceOp::create(b, loc, copy.getResult(0), output,
                                           offsets, sizes, strides);
    at += kernel.inputWindow(k)->extents[axis];
  }
  func::ReturnOp::create(b, loc, output);
}

std::pair<Value, Value> gpipe::wrapIndex(OpBuilder &b, Location loc,
                                         Value index, Value extent) {
  Type type = extent.getType();
  Value i = index;
  if (index.getType() != type)
    i = type.isIndex()
            ? arith::IndexCastOp::create(b, loc, type, index).getResult()
            : arith::ExtSIOp::create(b, loc, type, index).getResult();
  Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(type));
  Value negative =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i, zero);
  Value wrapped = arith::SelectOp::create(
      b, loc, negative, arith::AddIOp::create(b, loc, i, extent), i);
  // Unsigned: a wrapped index still below 0 is far above the extent.
  Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                        wrapped, extent);
  return {arith::SelectOp::create(b, loc, inRange, wrapped, zero), inRange};
}

/// A gather's or gather_grad's body (checkGather). The gather is one
/// generic over the output reading the table with tensor.extract; the
/// gradient fills its output with 0, then adds dy's elements in row-major
/// order (each output element's in index order) in a loop nest.
static void buildGather(OpBuilder &b, Location loc, const KernelSpec &kernel,
                        ValueRange args) {
  const KernelStep &step = kernel.steps[0];
  const unsigned axis = unsigned(step.constant("axis"));
  const bool batched = kernel.inputDims[1].size() == 2;
  Value table = step.op == "gather" ? args[0] : args[2];
  Value extent = tensor::DimOp::create(b, loc, table, int64_t(axis));
  auto indexAt = [&](OpBuilder &nb, Location l, ValueRange coords) {
    SmallVector<Value> at;
    if (batched)
      at.push_back(coords[0]);
    at.push_back(coords[axis]);
    return tensor::ExtractOp::create(nb, l, args[1], at).getResult();
  };
  Value result;
  if (step.op == "gather") {
    AffineMap identity = b.getMultiDimIdentityMap(kernel.rank);
    SmallVector<utils::IteratorType> parallel(kernel.rank,
                                              utils::IteratorType::parallel);
    auto generic = linalg::GenericOp::create(
        b, loc, TypeRange{args[2].getType()}, ValueRange{}, args[2],
        ArrayRef<AffineMap>{identity}, parallel,
        [&](OpBuilder &nb, Location l, ValueRange) {
          SmallVector<Value> coords;
          for (unsigned d = 0; d < kernel.rank; ++d)
            coords.push_back(linalg::IndexOp::create(nb, l, d));
          auto [at, inRange] = wrapIndex(nb, l, indexAt(nb, l, coords), extent);
          coords[axis] = at;
          Value element = tensor::ExtractOp::create(nb, l, table, coords);
          Value nan = arith::ConstantOp::create(
              nb, l,
              nb.getF32FloatAttr(std::numeric_limits<float>::quiet_NaN()));
          linalg::YieldOp::create(
              nb, l,
              ValueRange{arith::SelectOp::create(nb, l, inRange, element, nan)
                             .getResult()});
        });
    result = generic.getResult(0);
  } else {
    Value dy = args[0];
    Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
    Value filled = linalg::FillOp::create(b, loc, zero, args[2]).getResult(0);
    SmallVector<Value> lower, upper, steps;
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
    for (unsigned d = 0; d < kernel.rank; ++d) {
      lower.push_back(c0);
      steps.push_back(c1);
      upper.push_back(tensor::DimOp::create(b, loc, dy, int64_t(d)));
    }
    scf::LoopNest nest = scf::buildLoopNest(
        b, loc, lower, upper, steps, ValueRange{filled},
        [&](OpBuilder &nb, Location l, ValueRange ivs,
            ValueRange iter) -> scf::ValueVector {
          auto [at, inRange] = wrapIndex(nb, l, indexAt(nb, l, ivs), extent);
          SmallVector<Value> target(ivs);
          target[axis] = at;
          auto add = scf::IfOp::create(
              nb, l, inRange,
              [&](OpBuilder &tb, Location tl) {
                Value sum = arith::AddFOp::create(
                    tb, tl, tensor::ExtractOp::create(tb, tl, iter[0], target),
                    tensor::ExtractOp::create(tb, tl, dy, ivs));
                scf::YieldOp::create(
                    tb, tl,
                    tensor::InsertOp::create(tb, tl, sum, iter[0], target)
                        .getResult());
              },
              [&](OpBuilder &eb, Location el) {
                scf::YieldOp::create(eb, el, iter[0]);
              });
          return {add.getResult(0)};
        });
    result = nest.results[0];
  }
  func::ReturnOp::create(b, loc, result);
}

/// A row kernel's body (KernelSpec::rowDims): a loop nest over the rows;
/// in each, the inputs' parts of the row (a slice over the columns, or the
/// element of an input without columns), one generic per leading reduction
/// over the columns (to a 0-D tensor; each reads the results before it),
/// then one that writes the row. Every generic is marked for the schedule.
static void buildRowKernel(OpBuilder &b, Location loc, StringRef name,
                           const KernelSpec &kernel, ValueRange args,
                           ArrayRef<OpFoldResult> spaceSizes) {
  const unsigned rows = kernel.rowDims, cols = kernel.rank - rows;
  MLIRContext *ctx = b.getContext();
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  SmallVector<Value> lower(rows, c0), upper, steps(rows, c1);
  for (unsigned d = 0; d < rows; ++d)
    upper.push_back(getValueOrCreateConstantIndexOp(b, loc, spaceSizes[d]));
  auto colsOf = [&](ArrayRef<unsigned> dims) {
    SmallVector<unsigned> out;
    for (unsigned dim : dims)
      if (dim >= rows)
        out.push_back(dim);
    return out;
  };
  // A memref's part of the row at `ivs`: its columns, in its own order.
  auto rowPart = [&](OpBuilder &nb, Location l, Value memref,
                     ArrayRef<unsigned> dims, ValueRange ivs,
                     Type element) -> Value {
    SmallVector<OpFoldResult> offsets, sizes, strides;
    SmallVector<int64_t> shape;
    for (unsigned dim : dims) {
      offsets.push_back(dim < rows ? OpFoldResult(ivs[dim])
                                   : OpFoldResult(nb.getIndexAttr(0)));
      sizes.push_back(dim < rows ? OpFoldResult(nb.getIndexAttr(1))
                                 : spaceSizes[dim]);
      strides.push_back(nb.getIndexAttr(1));
      if (dim >= rows)
        shape.push_back(ShapedType::kDynamic);
    }
    auto type = RankedTensorType::get(shape, element);
    return tensor::ExtractSliceOp::create(nb, l, type, memref, offsets, sizes,
                                          strides);
  };
  auto colMap = [&](ArrayRef<unsigned> dims) {
    SmallVector<AffineExpr> exprs;
    for (unsigned dim : colsOf(dims))
      exprs.push_back(getAffineDimExpr(dim - rows, ctx));
    return AffineMap::get(cols, 0, exprs, ctx);
  };
  // Each leading reduction's 0-D accumulator, made once (its buffer then
  // serves every row) and refilled per row.
  SmallVector<Value> accumulators;
  for (const KernelStep &step : ArrayRef<KernelStep>(kernel.steps).drop_back())
    if (isReductionStep(step.op))
      accumulators.push_back(
          tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, b.getF32Type()));
  scf::LoopNest nest = scf::buildLoopNest(
      b, loc, lower, upper, steps, ValueRange{args.back()},
      [&](OpBuilder &nb, Location l, ValueRange ivs,
          ValueRange iter) -> scf::ValueVector {
        // Inputs without columns are one element per row; the others a
        // slice over the columns, read by each generic.
        SmallVector<Value> scalars(kernel.numInputs), parts;
        SmallVector<unsigned> partOf;
        SmallVector<AffineMap> partMaps;
        for (unsigned k = 0; k < kernel.numInputs; ++k) {
          ArrayRef<unsigned> dims = kernel.inputDims[k];
          KernelElement element = kernel.inputType(k);
          if (colsOf(dims).empty()) {
            SmallVector<Value> at;
            for (unsigned dim : dims)
              at.push_back(ivs[dim]);
            scalars[k] = fromStorage(
                nb, l, tensor::ExtractOp::create(nb, l, args[k], at), element);
            continue;
          }
          partOf.push_back(k);
          parts.push_back(
              rowPart(nb, l, args[k], dims, ivs, storageType(nb, element)));
          partMaps.push_back(colMap(dims));
        }
        // The steps at a point of the row, given the parts' elements there.
        auto stepsAt = [&](OpBuilder &gb, Location gl, ValueRange elems,
                           ArrayRef<Value> reductions) {
          SmallVector<Value> inputs(scalars);
          for (auto [n, k] : llvm::enumerate(partOf))
            inputs[k] = fromStorage(gb, gl, elems[n], kernel.inputType(k));
          return *emitKernelSteps(gb, gl, name, kernel, inputs, reductions);
        };
        SmallVector<utils::IteratorType> reduction(
            cols, utils::IteratorType::reduction);
        SmallVector<Value> results;
        for (const KernelStep &step : kernel.steps) {
          if (&step == &kernel.steps.back() || !isReductionStep(step.op))
            continue;
          bool max = step.op == "reduce_max";
          Value identity = arith::ConstantOp::create(
              nb, l,
              nb.getF32FloatAttr(max ? -std::numeric_limits<float>::infinity()
                                     : 0.0f));
          Value init =
              linalg::FillOp::create(nb, l, identity,
                                     accumulators[results.size()])
                  .getResult(0);
          SmallVector<AffineMap> maps(partMaps);
          maps.push_back(AffineMap::get(cols, 0, {}, ctx));
          auto generic = linalg::GenericOp::create(
              nb, l, TypeRange{init.getType()}, parts, init, maps, reduction,
              [&](OpBuilder &gb, Location gl, ValueRange elems) {
                SmallVector<Value> values =
                    stepsAt(gb, gl, elems.drop_back(), results);
                Value v = values[step.operands[0]], acc = elems.back();
                ScalarBuilder scalar{gb, gl};
                linalg::YieldOp::create(
                    gb, gl,
                    ValueRange{max ? arith::MaximumFOp::create(gb, gl, acc, v)
                                         .getResult()
                                   : scalar.add(acc, v)});
              });
          generic->setAttr("gpipe.tile", nb.getUnitAttr());
          Value total = tensor::ExtractOp::create(nb, l, generic.getResult(0),
                                                  ValueRange{});
          if (step.op == "reduce_mean")
            total = ScalarBuilder{nb, l}.div(
                total, ScalarBuilder{nb, l}.k(float(step.constant("count"))));
          results.push_back(total);
        }
        // The row of the output.
        SmallVector<unsigned> all;
        for (unsigned d = 0; d < kernel.rank; ++d)
          all.push_back(d);
        Value outRow = rowPart(nb, l, iter[0], all, ivs,
                               storageType(nb, kernel.outputType));
        SmallVector<AffineMap> maps(partMaps);
        maps.push_back(colMap(all));
        auto generic = linalg::GenericOp::create(
            nb, l, TypeRange{outRow.getType()}, parts, outRow, maps,
            SmallVector<utils::IteratorType>(cols,
                                             utils::IteratorType::parallel),
            [&](OpBuilder &gb, Location gl, ValueRange elems) {
              SmallVector<Value> values =
                  stepsAt(gb, gl, elems.drop_back(), results);
              linalg::YieldOp::create(
                  gb, gl, ValueRange{toStorage(gb, gl, values.back())});
            });
        generic->setAttr("gpipe.tile", nb.getUnitAttr());
        SmallVector<OpFoldResult> offsets, sizes,
            strides(kernel.rank, nb.getIndexAttr(1));
        for (unsigned d = 0; d < kernel.rank; ++d) {
          offsets.push_back(d < rows ? OpFoldResult(ivs[d])
                                     : OpFoldResult(nb.getIndexAttr(0)));
          sizes.push_back(d < rows ? OpFoldResult(nb.getIndexAttr(1))
                                   : spaceSizes[d]);
        }
        return {tensor::InsertSliceOp::create(nb, l, generic.getResult(0),
                                              iter[0], offsets, sizes, strides)
                    .getResult()};
      });
  func::ReturnOp::create(b, loc, nest.results[0]);
}

LogicalResult gpipe::buildKernelFunction(ModuleOp module, Location loc,
                                         StringRef name,
                                         const KernelSpec &kernel) {
  if (std::string problem = checkKernel(kernel); !problem.empty())
    return emitError(loc) << "kernel '" << name << "': " << problem;

  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module.getBody());
  auto tensorOfRank = [&](size_t rank, KernelElement element) {
    return RankedTensorType::get(SmallVector<int64_t>(rank, ShapedType::kDynamic),
                                 storageType(b, element));
  };
  SmallVector<Type> argTypes;
  for (auto [k, dims] : llvm::enumerate(kernel.inputDims))
    argTypes.push_back(
        tensorOfRank(dims.size(), kernel.inputType(unsigned(k))));
  Type outputType = tensorOfRank(kernel.outputDims.size(), kernel.outputType);
  argTypes.push_back(outputType);
  auto func = func::FuncOp::create(b, loc, name,
                                   b.getFunctionType(argTypes, {outputType}));
  func.setArgAttr(kernel.numInputs,
                  bufferization::BufferizationDialect::kWritableAttrName,
                  b.getBoolAttr(true));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);

  auto projection = [&](ArrayRef<unsigned> dims) {
    SmallVector<AffineExpr> exprs;
    for (unsigned dim : dims)
      exprs.push_back(b.getAffineDimExpr(dim));
    return AffineMap::get(kernel.rank, 0, exprs, ctx);
  };
  SmallVector<AffineMap> maps;
  for (ArrayRef<unsigned> dims : kernel.inputDims)
    maps.push_back(projection(dims));
  maps.push_back(projection(kernel.outputDims));
  SmallVector<utils::IteratorType> iterators(kernel.rank,
                                             utils::IteratorType::reduction);
  for (unsigned dim : kernel.outputDims)
    iterators[dim] = utils::IteratorType::parallel;

  ValueRange args = entry->getArguments();
  // Each iteration dimension's size, from a memref whole along it (the
  // output's first).
  SmallVector<OpFoldResult> spaceSizes(kernel.rank);
  auto sizesFrom = [&](Value memref, ArrayRef<unsigned> dims,
                       const KernelWindow *w) {
    for (auto [i, dim] : llvm::enumerate(dims))
      if (!spaceSizes[dim] && (!w || w->whole(i)))
        spaceSizes[dim] =
            tensor::DimOp::create(b, loc, memref, int64_t(i)).getResult();
  };
  sizesFrom(args.back(), kernel.outputDims,
            kernel.outputWindow ? &*kernel.outputWindow : nullptr);
  for (unsigned k = 0; k < kernel.numInputs; ++k)
    sizesFrom(args[k], kernel.inputDims[k], kernel.inputWindow(k));
  if (kernel.concatenates()) {
    buildConcat(b, loc, kernel, args);
    return success();
  }
  if (kernel.gathers()) {
    buildGather(b, loc, kernel, args);
    return success();
  }
  if (kernel.rowDims) {
    buildRowKernel(b, loc, name, kernel, args, spaceSizes);
    return success();
  }
  // A windowed memref as the part of it the space covers.
  auto windowOf = [&](ArrayRef<unsigned> dims, const KernelWindow &w,
                      SmallVector<OpFoldResult> &offsets,
                      SmallVector<OpFoldResult> &sizes,
                      SmallVector<OpFoldResult> &strides) {
    for (auto [i, dim] : llvm::enumerate(dims)) {
      offsets.push_back(b.getIndexAttr(w.offsets[i]));
      sizes.push_back(spaceSizes[dim]);
      strides.push_back(b.getIndexAttr(w.steps[i]));
    }
  };
  SmallVector<Value> inputs(args.drop_back());
  for (unsigned k = 0; k < kernel.numInputs; ++k)
    if (const KernelWindow *w = kernel.inputWindow(k)) {
      SmallVector<OpFoldResult> offsets, sizes, strides;
      windowOf(kernel.inputDims[k], *w, offsets, sizes, strides);
      inputs[k] = tensor::ExtractSliceOp::create(b, loc, args[k], offsets,
                                                 sizes, strides);
    }
  Value output = args.back();
  // An output window: the whole output 0, the generic writing its part.
  Value whole;
  SmallVector<OpFoldResult> outOffsets, outSizes, outStrides;
  if (kernel.outputWindow) {
    Value zero = arith::ConstantOp::create(
        b, loc, b.getZeroAttr(storageType(b, kernel.outputType)));
    whole = linalg::FillOp::create(b, loc, zero, output).getResult(0);
    windowOf(kernel.outputDims, *kernel.outputWindow, outOffsets, outSizes,
             outStrides);
    output = tensor::ExtractSliceOp::create(b, loc, whole, outOffsets,
                                            outSizes, outStrides);
  }
  const KernelStep *reduction =
      kernel.reduces() ? &kernel.steps.back() : nullptr;
  // A reduction whose reduced axes all had extent 1 (dropped from the space)
  // reduces no dimension: each output element is its operand's one element.
  // The runtime runs such a kernel as element-wise, in place where its
  // output is an input's buffer (GeneratedCall.h), so the output is neither
  // filled first nor read.
  const bool accumulates = reduction && kernel.outputDims.size() < kernel.rank;
  ArrayRef<KernelStep> pointwise = kernel.steps;
  if (reduction)
    pointwise = pointwise.drop_back();
  if (accumulates) {
    // The output starts at the reduction's identity.
    float identity = reduction->op == "reduce_max"
                         ? -std::numeric_limits<float>::infinity()
                         : 0.0f;
    Value init = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(identity));
    output = linalg::FillOp::create(b, loc, init, output).getResult(0);
  }
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{output.getType()}, inputs, output, maps, iterators,
      [&](OpBuilder &nested, Location nestedLoc, ValueRange elems) {
        ScalarBuilder scalar{nested, nestedLoc};
        SmallVector<Value> values;
        for (auto [k, elem] : llvm::enumerate(elems.drop_back()))
          values.push_back(fromStorage(nested, nestedLoc, elem,
                                       kernel.inputType(unsigned(k))));
        for (const KernelStep &step : pointwise) {
          SmallVector<Value> operands;
          for (unsigned operand : step.operands)
            operands.push_back(values[operand]);
          values.push_back(scalar.step(step, operands));
        }
        Value result = values.back();
        if (reduction) {
          Value acc = elems.back(), v = values[reduction->operands[0]];
          result = !accumulates ? v
                   : reduction->op == "reduce_max"
                       ? arith::MaximumFOp::create(nested, nestedLoc, acc, v)
                             .getResult()
                       : scalar.add(acc, v);
        }
        linalg::YieldOp::create(nested, nestedLoc,
                                toStorage(nested, nestedLoc, result));
      });
  generic->setAttr("gpipe.tile", b.getUnitAttr());
  Value result = generic.getResult(0);
  if (kernel.outputWindow)
    result = tensor::InsertSliceOp::create(b, loc, result, whole, outOffsets,
                                           outSizes, outStrides);
  if (reduction && reduction->op == "reduce_mean") {
    // The sum over the count, a constant: means never reduce the batch.
    unsigned rank = kernel.outputDims.size();
    AffineMap identity = b.getMultiDimIdentityMap(rank);
    Value count = arith::ConstantOp::create(
        b, loc, b.getF32FloatAttr(float(reduction->constant("count"))));
    result =
        linalg::GenericOp::create(
            b, loc, TypeRange{outputType}, ValueRange{}, result,
            ArrayRef<AffineMap>{identity},
            SmallVector<utils::IteratorType>(rank,
                                             utils::IteratorType::parallel),
            [&](OpBuilder &nested, Location nestedLoc, ValueRange elems) {
              ScalarBuilder scalar{nested, nestedLoc};
              linalg::YieldOp::create(nested, nestedLoc,
                                      scalar.div(elems[0], count));
            })
            .getResult(0);
  }
  func::ReturnOp::create(b, loc, result);
  return success();
}
