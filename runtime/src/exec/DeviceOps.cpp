//===- DeviceOps.cpp - One op of a stage program, issued as kernels -------===//
//
// Turns an op of the op table into the backend's kernel calls on its device's
// compute stream: its results (with their saved state) are placed first, a
// parameter-gradient result that accumulates straight into the parameter's
// gradient gets that buffer, then the kernels are queued.
//
//===----------------------------------------------------------------------===//

#include "exec/DeviceExecutorImpl.h"
#include "verify/ValidationText.h"

#include <cassert>
#include <cmath>
#include <utility>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

/// The bytes of the state `op` saves with its result 0 (OpTable.h).
static std::vector<int64_t> savedBytes(const Op &op, const DeviceValue &x) {
  SavedState state =
      savedStateOf(op.kind, x.shape.data(), x.shape.size(), op.heads);
  return std::vector<int64_t>(state.bytes, state.bytes + state.count);
}

std::string DeviceExecutor::Impl::issueOp(unsigned device, unsigned m,
                                          const Op &op, size_t index,
                                          bool backward) {
  const unsigned stage = runs[device].stage;
  const StageProgram &program = bundle.stages[stage];
  std::vector<DeviceValue> &values = runs[device].at(m);
  const StreamId s = compute(device);
  DeviceBackend &b = *issue;
  std::vector<const DeviceValue *> in(op.operands.size());
  for (size_t k = 0; k < op.operands.size(); ++k) {
    in[k] = &values[op.operands[k]];
    if (!in[k]->present)
      return "operand " + std::to_string(k) + " (value " +
             std::to_string(op.operands[k]) +
             ") was never defined, received or loaded";
  }
  auto fused = [&](size_t r) -> DeviceParameter * {
    if (!backward)
      return nullptr;
    const std::string &name = fusion[stage].accumulatesInto[index][r];
    return name.empty() ? nullptr : paramByName.at(name);
  };
  // Results, with their saved state, before the kernels that write them.
  std::vector<float *> out(op.results.size(), nullptr);
  std::vector<bool> accumulateInto(op.results.size(), false);
  static const DeviceValue kNoOperand;
  const DeviceValue &x0 = in.empty() ? kNoOperand : *in[0];
  std::vector<int64_t> extra;
  if (!in.empty())
    extra = savedBytes(op, *in[0]);
  for (size_t r = 0; r < op.results.size(); ++r) {
    int id = op.results[r];
    if (DeviceParameter *param = fused(r)) {
      out[r] = param->grad;
      // The step's first write overwrites (as into a value of its own).
      accumulateInto[r] = !std::exchange(param->gradientStale, false);
    } else if (op.kind == OpKind::Param) {
      auto it = paramByName.find(op.name);
      if (it == paramByName.end())
        return "unknown parameter '" + op.name + "'";
      DeviceValue &view = values[id];
      view = DeviceValue();
      view.shape = program.values[id].shape;
      view.data = reinterpret_cast<char *>(it->second->value);
      view.present = true;
      view.parameter = true;
      return {};
    } else if (id >= 0) {
      out[r] = newValue(device, m, id, r == 0 ? extra : std::vector<int64_t>())
                   .f();
    }
  }
  DeviceValue *result =
      op.results.empty() || op.results[0] < 0 ? nullptr
                                              : &values[op.results[0]];
  auto f = [&](size_t k) { return in[k]->f(); };
  // A parameter-gradient result starts at zero where its kernels would
  // accumulate onto something else: a value of its own, or a gradient's
  // first write of the step.
  auto zeroUnlessAccumulating = [&](size_t r) {
    if (!out[r] || accumulateInto[r])
      return;
    const DeviceParameter *param = fused(r);
    b.fillZero(s, out[r],
               (param ? param->size : values[op.results[r]].numElements()) * 4);
  };

  switch (op.kind) {
  case OpKind::Param:
    break;
  case OpKind::Dense: {
    int64_t inDim = in[1]->shape[0], outDim = in[1]->shape[1];
    GemmBatch g;
    g.m = x0.numElements() / inDim;
    g.n = outDim;
    g.k = inDim;
    g.a = f(0);
    g.lda = inDim;
    g.b = f(1);
    g.ldb = outDim;
    g.bIsParameter = packable(*in[1]);
    g.c = out[0];
    g.ldc = outDim;
    b.gemm(s, g);
    if (in.size() == 3)
      b.addRowVector(s, f(2), out[0], g.m, outDim);
    break;
  }
  case OpKind::Relu:
    b.relu(s, f(0), out[0], x0.numElements());
    break;
  case OpKind::Gelu:
    b.gelu(s, f(0), out[0], x0.numElements());
    break;
  case OpKind::GeluErf:
    b.geluErf(s, f(0), out[0], x0.numElements());
    break;
  case OpKind::Tanh:
    b.tanh(s, f(0), out[0], x0.numElements());
    break;
  case OpKind::Softmax:
    b.softmax(s, f(0), out[0], x0.rowsOf(), x0.colsOf(), 0);
    break;
  case OpKind::LayerNorm:
    b.layerNorm(s, f(0), f(1), f(2), out[0],
                reinterpret_cast<float *>(result->saved[0]),
                reinterpret_cast<float *>(result->saved[1]), x0.rowsOf(),
                x0.colsOf(), op.epsilon);
    break;
  case OpKind::Add:
  case OpKind::AddGrads:
    b.add(s, f(0), f(1), out[0], x0.numElements());
    break;
  case OpKind::Embedding:
    b.embedding(s, in[0]->i(), f(1), out[0], x0.numElements(),
                in[1]->shape[1]);
    break;
  case OpKind::Attention: {
    AttentionCall call;
    call.x = f(0), call.wqkv = f(1), call.wo = f(2), call.y = out[0];
    if (in.size() == 5) // the biases come together
      call.qkvBias = f(3), call.outBias = f(4);
    call.qkv = reinterpret_cast<float *>(result->saved[0]);
    call.lse = reinterpret_cast<float *>(result->saved[1]);
    call.context = reinterpret_cast<float *>(result->saved[2]);
    call.batch = x0.shape[0], call.seq = x0.shape[1], call.width = x0.shape[2];
    call.heads = op.heads, call.causal = op.causal;
    // A composed attention's scores, outside the plan (a fused one needs
    // none), as attention_grad's workspace below.
    const int64_t needed =
        4 * b.attentionScratch(call.batch, call.seq, call.width, call.heads);
    if (needed > 0) {
      std::string error = reserveWorkspace(device, needed);
      if (!error.empty())
        return error;
      call.scratch = reinterpret_cast<float *>(workspace[device]);
    }
    b.attention(s, call);
    break;
  }
  case OpKind::Dropout: {
    if (pass->evaluating) { // evaluation has no dropout
      b.copyBetweenDevices(s, out[0], device, f(0), device,
                           x0.numElements() * 4);
      break;
    }
    int64_t rows = x0.rowsOf();
    int64_t perExample =
        program.values[op.operands[0]].batched && !x0.shape.empty()
            ? rows / x0.shape[0]
            : 0;
    b.dropout(s, f(0), out[0], reinterpret_cast<uint8_t *>(result->saved[0]),
              rows, x0.colsOf(), op.rate, op.seed, uint64_t(steps + 1),
              firstRow(m) * perExample);
    break;
  }
  case OpKind::BatchNorm: {
    float *mean = reinterpret_cast<float *>(result->saved[0]);
    float *rstd = reinterpret_cast<float *>(result->saved[1]);
    if (pass->evaluating) {
      b.batchNormInference(s, f(0), f(1), f(2), f(3), f(4), out[0], mean, rstd,
                           x0.rowsOf(), x0.colsOf(), op.epsilon);
      break;
    }
    // A training forward adds the micro-batch's sums into the running
    // statistics' gradient buffers; a recompute has added them already.
    float *sum = nullptr, *squares = nullptr;
    if (!recomputing) {
      sum = paramByName.at(paramDefining(program, op.operands[3]))->grad;
      squares = paramByName.at(paramDefining(program, op.operands[4]))->grad;
    }
    b.batchNorm(s, f(0), f(1), f(2), out[0], mean, rstd, sum, squares,
                x0.rowsOf(), x0.colsOf(), op.epsilon);
    break;
  }
  case OpKind::SoftmaxCrossEntropy:
    b.softmaxCrossEntropy(s, f(0), in[1]->i(),
                          reinterpret_cast<float *>(result->saved[0]), out[0],
                          x0.rowsOf(), x0.colsOf());
    break;
  case OpKind::MseLoss:
    b.mse(s, f(0), f(1), out[0], x0.numElements());
    break;
  case OpKind::Matmul: {
    // At this micro-batch's shapes: a batched operand's dimension 0 is its
    // rows (validateBundle kept the batch in y's dimension 0, or contracted
    // it in both operands).
    MatmulCall call;
    call.a = f(0), call.b = f(1), call.y = out[0];
    call.aShape = in[0]->shape, call.bShape = in[1]->shape;
    call.transposeA = op.transposeA, call.transposeB = op.transposeB;
    MatmulGeometry g;
    if (!matmulGeometryOf(call.aShape, call.bShape, call.transposeA,
                          call.transposeB, g) ||
        g.resultShape() != result->shape)
      return "matmul of " + runtime::detail::shapeString(call.aShape) +
             " and " + runtime::detail::shapeString(call.bShape) +
             " does not give the result's " +
             runtime::detail::shapeString(result->shape);
    b.matmul(s, call);
    break;
  }
  case OpKind::DenseGrad: {
    // (dy, x, w) -> (dx = dy w^T, dw += x^T dy)
    int64_t inDim = in[2]->shape[0], outDim = in[2]->shape[1];
    int64_t rows = in[1]->numElements() / inDim;
    if (out[0]) {
      GemmBatch g;
      g.transB = true;
      g.m = rows, g.n = inDim, g.k = outDim;
      g.a = f(0), g.lda = outDim, g.b = f(2), g.ldb = outDim;
      g.bIsParameter = packable(*in[2]);
      g.c = out[0], g.ldc = inDim;
      b.gemm(s, g);
    }
    if (out[1]) {
      GemmBatch g;
      g.transA = true;
      g.m = inDim, g.n = outDim, g.k = rows;
      g.beta = accumulateInto[1] ? 1.0f : 0.0f;
      g.a = f(1), g.lda = inDim, g.b = f(0), g.ldb = outDim;
      g.c = out[1], g.ldc = outDim;
      b.gemm(s, g);
    }
    break;
  }
  case OpKind::BiasGrad:
    zeroUnlessAccumulating(0);
    b.columnSums(s, f(0), out[0], x0.rowsOf(), x0.colsOf());
    break;
  case OpKind::ReluGrad:
    b.reluGrad(s, f(1), f(0), out[0], x0.numElements());
    break;
  case OpKind::GeluGrad:
    b.geluGrad(s, f(1), f(0), out[0], x0.numElements());
    break;
  case OpKind::GeluErfGrad:
    b.geluErfGrad(s, f(1), f(0), out[0], x0.numElements());
    break;
  case OpKind::TanhGrad:
    b.tanhGrad(s, f(1), f(0), out[0], x0.numElements());
    break;
  case OpKind::SoftmaxGrad:
    b.softmaxGrad(s, f(1), f(0), out[0], x0.rowsOf(), x0.colsOf());
    break;
  case OpKind::LayerNormGrad: {
    // (dy, forward y, x, gamma) -> (dx, dgamma, dbeta)
    const DeviceValue &forward = *in[1];
    const float *mean = reinterpret_cast<const float *>(forward.saved[0]);
    const float *rstd = reinterpret_cast<const float *>(forward.saved[1]);
    int64_t rows = in[2]->rowsOf(), cols = in[2]->colsOf();
    if (out[0])
      b.layerNormGradInput(s, f(0), f(2), f(3), mean, rstd, out[0], rows,
                           cols);
    zeroUnlessAccumulating(1);
    zeroUnlessAccumulating(2);
    b.layerNormGradParams(s, f(0), f(2), mean, rstd, out[1], out[2], rows,
                          cols);
    break;
  }
  case OpKind::BatchNormGrad: {
    // (dy, forward y, x, gamma) -> (dx, dgamma, dbeta); the forward's state
    // holds the column sums' room after mean and rstd.
    const DeviceValue &forward = *in[1];
    zeroUnlessAccumulating(1);
    zeroUnlessAccumulating(2);
    b.batchNormGrad(s, f(0), f(2), f(3),
                    reinterpret_cast<const float *>(forward.saved[0]),
                    reinterpret_cast<const float *>(forward.saved[1]),
                    reinterpret_cast<float *>(forward.saved[2]), out[0], out[1],
                    out[2], in[2]->rowsOf(), in[2]->colsOf());
    break;
  }
  case OpKind::EmbeddingGrad:
    zeroUnlessAccumulating(0);
    b.embeddingGrad(s, in[1]->i(), f(0), out[0], in[1]->numElements(),
                    program.values[op.results[0]].shape[1]);
    break;
  case OpKind::AttentionGrad: {
    // (dy, forward y, x, wqkv, wo[, bqkv, bo]) -> (dx, dwqkv, dwo[, dbqkv,
    // dbo])
    const DeviceValue &forward = *in[1];
    AttentionGradCall call;
    call.dy = f(0), call.x = f(2), call.wqkv = f(3), call.wo = f(4);
    call.qkv = reinterpret_cast<const float *>(forward.saved[0]);
    call.lse = reinterpret_cast<const float *>(forward.saved[1]);
    call.context = reinterpret_cast<const float *>(forward.saved[2]);
    call.dx = out[0], call.dwqkv = out[1], call.dwo = out[2];
    if (out.size() == 5)
      call.dqkvBias = out[3], call.doutBias = out[4];
    call.batch = in[2]->shape[0], call.seq = in[2]->shape[1];
    call.width = in[2]->shape[2];
    call.heads = op.heads, call.causal = op.causal;
    // The arena holds the plan's scratch (CpuKernels' attentionBackward's);
    // a backend that needs more gets a workspace of its own, outside it.
    const int64_t needed = 4 * b.attentionGradScratch(call.batch, call.seq,
                                                      call.width, call.heads);
    const int64_t planned = scratchBytesAt(op, in);
    call.scratch = reinterpret_cast<float *>(scratchBuffer(device, planned));
    if (needed > planned) {
      std::string error = reserveWorkspace(device, needed);
      if (!error.empty())
        return error;
      call.scratch = reinterpret_cast<float *>(workspace[device]);
    }
    for (size_t r = 1; r < out.size(); ++r)
      zeroUnlessAccumulating(r);
    b.attentionGrad(s, call);
    break;
  }
  case OpKind::DropoutGrad:
    b.dropoutGrad(s, reinterpret_cast<const uint8_t *>(in[1]->saved[0]), f(0),
                  out[0], x0.numElements(), op.rate);
    break;
  case OpKind::SoftmaxCrossEntropyGrad: {
    int64_t rows = in[1]->numElements(),
            classes = program.values[op.results[0]].shape.back();
    b.softmaxCrossEntropyGrad(
        s, reinterpret_cast<const float *>(in[0]->saved[0]), in[1]->i(),
        float(double(rowsOf(m)) / double(bundle.batch)), out[0], rows,
        classes);
    break;
  }
  case OpKind::MseLossGrad:
    b.mseGrad(s, f(0), f(1), float(double(rowsOf(m)) / double(bundle.batch)),
              out[0], x0.numElements());
    break;
  case OpKind::AccumulateGrad: {
    auto it = paramByName.find(op.name);
    if (it == paramByName.end())
      return "unknown parameter '" + op.name + "'";
    DeviceParameter &param = *it->second;
    if (std::exchange(param.gradientStale, false))
      b.copyBetweenDevices(s, param.grad, device, f(0), device, param.size * 4);
    else
      b.accumulate(s, f(0), param.grad, param.size);
    break;
  }
  case OpKind::Zeros:
    b.fillZero(s, out[0], result->numElements() * 4);
    break;
  case OpKind::Kernel: {
    // Host code is loaded here; a GPU backend loaded its own
    // (loadGeneratedKernels) and finds it by call.kernel. An i32 memref
    // (kernel.types) is passed as the f32 ones are: its buffer's address,
    // 4 bytes an element, which nothing here reads.
    if (!code && b.runsHostCode())
      return "no generated code is loaded";
    const GeneratedKernelSpec &kernel = bundle.code.kernels[size_t(op.kernel)];
    GeneratedCall call;
    call.entry = code ? code->entry(size_t(op.kernel)) : nullptr;
    call.kernel = op.kernel;
    call.output = out[0];
    call.space = op.space;
    // A batched space runs the micro-batch's rows of dimension 0.
    if (op.spaceBatched)
      call.space[0] = op.space[0] / bundle.batch * rowsOf(m);
    call.inputDims = kernel.inputDims;
    call.outputDims = kernel.outputDims;
    call.extents = kernel.extents;
    // validateBundle matched the counts at the full batch; the micro-batch
    // keeps them. Each memref's own sizes: the space's, or its extents.
    auto mismatch = [&](const std::string &what, int64_t has, size_t memref) {
      std::vector<int64_t> sizes;
      for (size_t i = 0; i < call.dimsOf(memref).size(); ++i)
        sizes.push_back(call.sizeOf(memref, i));
      return what + " has " + std::to_string(has) + " elements, expected " +
             std::to_string(call.elementsOf(memref)) + " (its sizes " +
             runtime::detail::shapeString(sizes) + " over space " +
             runtime::detail::shapeString(call.space) + ")";
    };
    if (result->numElements() != call.outputElements())
      return mismatch("the result", result->numElements(), call.outputMemRef());
    for (size_t k = 0; k < in.size(); ++k) {
      if (in[k]->numElements() != call.elementsOf(k))
        return mismatch("operand " + std::to_string(k), in[k]->numElements(),
                        k);
      call.inputs.push_back(f(k));
    }
    b.generated(s, call);
    break;
  }
  case OpKind::Conv2d:
  case OpKind::Conv2dGrad:
  case OpKind::MaxPool2d:
  case OpKind::MaxPool2dGrad:
  case OpKind::AvgPool2d:
  case OpKind::AvgPool2dGrad:
  case OpKind::GlobalAvgPool:
  case OpKind::GlobalAvgPoolGrad:
  case OpKind::Flatten:
  case OpKind::FlattenGrad:
    return issueImageOp(device, op, in, out, result, accumulateInto);
  }
  return {};
}

std::string DeviceExecutor::Impl::issueFused(unsigned device, unsigned m,
                                             const Op &first,
                                             const Op &second) {
  std::vector<DeviceValue> &values = runs[device].at(m);
  for (const Op *op : {&first, &second})
    for (size_t k = op == &second ? 1 : 0; k < op->operands.size(); ++k)
      if (!values[op->operands[k]].present)
        return "operand " + std::to_string(k) + " of " + opKindName(op->kind) +
               " (value " + std::to_string(op->operands[k]) +
               ") was never defined, received or loaded";
  const StreamId s = compute(device);
  DeviceBackend &b = *issue;
  const DeviceValue &x = values[first.operands[0]];
  DeviceValue &mid =
      newValue(device, m, first.results[0], savedBytes(first, x));
  DeviceValue &out =
      newValue(device, m, second.results[0], savedBytes(second, mid));
  switch (first.fusion) {
  case FusionKind::DenseActivation: {
    const DeviceValue &w = values[first.operands[1]];
    GemmBatch g;
    g.k = w.shape[0];
    g.n = w.shape[1];
    g.m = x.numElements() / g.k;
    g.a = x.f();
    g.lda = g.k;
    g.b = w.f();
    g.ldb = g.n;
    g.bIsParameter = packable(w);
    g.c = mid.f();
    g.ldc = g.n;
    b.gemm(s, g);
    const float *bias =
        first.operands.size() == 3 ? values[first.operands[2]].f() : nullptr;
    Activation act = second.kind == OpKind::Relu      ? Activation::Relu
                     : second.kind == OpKind::Gelu    ? Activation::Gelu
                     : second.kind == OpKind::GeluErf ? Activation::GeluErf
                                                      : Activation::Tanh;
    b.biasActivation(s, bias, mid.f(), out.f(), g.m, g.n, act);
    return {};
  }
  case FusionKind::AddLayerNorm:
    b.addLayerNorm(s, x.f(), values[first.operands[1]].f(), mid.f(),
                   values[second.operands[1]].f(),
                   values[second.operands[2]].f(), out.f(),
                   reinterpret_cast<float *>(out.saved[0]),
                   reinterpret_cast<float *>(out.saved[1]), mid.rowsOf(),
                   mid.colsOf(), second.epsilon);
    return {};
  case FusionKind::None:
    break;
  }
  return "no fused kernel for " + std::string(opKindName(first.kind)) +
         " then " + opKindName(second.kind);
}

DeviceExecutor::Impl::OpTimer::OpTimer(Impl &impl, unsigned device,
                                       const char *section, const Op &op,
                                       const Op *fusedWith)
    : impl(impl) {
  if (!impl.timingOps)
    return;
  mark = &impl.opMarks.emplace_back();
  mark->device = device;
  mark->section = section;
  mark->first = opKindName(op.kind);
  mark->second = fusedWith ? opKindName(fusedWith->kind) : nullptr;
  mark->start = &impl.timeSlots.emplace_back(0.0);
  mark->end = &impl.timeSlots.emplace_back(0.0);
  impl.issue->recordTime(impl.compute(device), mark->start);
}

DeviceExecutor::Impl::OpTimer::~OpTimer() {
  if (mark)
    impl.issue->recordTime(impl.compute(mark->device), mark->end);
}

std::string DeviceExecutor::Impl::issueOps(unsigned device, unsigned m,
                                           const std::vector<Op> &ops,
                                           const char *section, bool backward,
                                           size_t begin, size_t end) {
  end = std::min(end, ops.size());
  for (size_t k = begin; k < end; ++k) {
    if (backward && fusion[runs[device].stage].skip[k])
      continue;
    const bool fused = ops[k].fusion != FusionKind::None;
    OpTimer timer(*this, device, section, ops[k],
                  fused ? &ops[k + 1] : nullptr);
    if (fused) {
      std::string error = issueFused(device, m, ops[k], ops[k + 1]);
      if (!error.empty())
        return error + ", in " + section + " ops " + std::to_string(k) +
               " and " + std::to_string(k + 1) + " (" +
               fusionName(ops[k].fusion) + ")";
      ++k;
      continue;
    }
    std::string error = issueOp(device, m, ops[k], k, backward);
    if (!error.empty())
      return error + ", in " + section + " op " + std::to_string(k) + " (" +
             opKindName(ops[k].kind) + ")";
  }
  return {};
}
