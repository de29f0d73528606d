//===- DeviceExecutor.cpp - Runs a bundle on a DeviceBackend --------------===//
//
// Issue order and hazards. Work on one stream runs in issue order, so a buffer
// that only device d's compute stream touches can be reused as soon as the
// host has issued its last use. Two kinds of buffers are touched by another
// stream and get more care:
//   - a receive buffer is written by the sender's copy stream: it is reserved
//     for the whole step (one per micro-batch and channel, as the GPipe stash
//     holds them anyway);
//   - a sent buffer is read by the sender's copy stream: when it is freed, it
//     waits in `pending` until the device's second next compute instruction,
//     whose stream first waits for the copy's event (long done by then, so
//     the copy of micro-batch m overlaps the forward of m + 1 at no cost).
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/device/DeviceExecutor.h"

#include "gpipe/runtime/Initializers.h"
#include "gpipe/runtime/ProgramAnalysis.h"
#include "gpipe/runtime/ScheduleVerifier.h"
#include "gpipe/runtime/device/ArenaAllocator.h"
#include "gpipe/runtime/device/KernelsByFunctor.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

namespace {

int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t dim : shape)
    n *= dim;
  return n;
}

/// Issues nothing: `create` runs a step against it to learn the placement.
class NullBackend final : public KernelsByFunctor<NullBackend, DeviceBackend> {
public:
  explicit NullBackend(unsigned devices) : devices(devices) {}
  template <class F> void forEach(StreamId, int64_t, const F &) {}
  std::string describe() const override { return "placement dry run"; }
  unsigned numDevices() const override { return devices; }
  std::string allocate(unsigned, int64_t, void **pointer) override {
    *pointer = nullptr;
    return {};
  }
  StreamId computeStream(unsigned d) override { return 2 * d; }
  StreamId copyStream(unsigned d) override { return 2 * d + 1; }
  EventId recordEvent(StreamId) override { return 0; }
  void waitEvent(StreamId, EventId) override {}
  void copyToDevice(StreamId, void *, const void *, int64_t) override {}
  void copyToHost(StreamId, void *, const void *, int64_t) override {}
  void copyBetweenDevices(StreamId, void *, unsigned, const void *, unsigned,
                          int64_t) override {}
  void fillZero(StreamId, void *, int64_t) override {}
  void gemm(StreamId, const GemmBatch &) override {}
  std::string synchronize(std::chrono::milliseconds) override { return {}; }
  std::string error() const override { return {}; }

private:
  unsigned devices;
};

/// A value of one micro-batch on one device, with the state its op saves.
struct DeviceValue {
  bool present = false;
  std::vector<int64_t> shape;
  char *data = nullptr;
  /// Layer norm: mean, rstd. Attention: qkv, probs, context. Cross-entropy:
  /// probs. Dropout: the mask (bytes) in saved[0].
  char *saved[3] = {nullptr, nullptr, nullptr};
  int64_t offset = -1;  ///< its arena block; -1: a view or a receive buffer
  bool reserved = false; ///< a receive buffer, kept for the whole step
  bool readByCopy = false;
  EventId copyDone = 0;

  int64_t numElements() const { return product(shape); }
  float *f() const { return reinterpret_cast<float *>(data); }
  const int32_t *i() const { return reinterpret_cast<const int32_t *>(data); }
  int64_t rowsOf() const {
    return shape.empty() ? 1 : numElements() / shape.back();
  }
  int64_t colsOf() const { return shape.empty() ? 1 : shape.back(); }
};

struct DeviceParameter {
  ParamSpec spec;
  unsigned device = 0;
  int64_t size = 0;
  float *value = nullptr, *grad = nullptr;
  float *slots[2] = {nullptr, nullptr};
};

using MessageKey = std::tuple<int, unsigned, unsigned, unsigned>;

struct PendingFree {
  int64_t offset;
  EventId copyDone;
  int64_t releaseAt; ///< compute instruction count
};

/// One device during the issue of a step.
struct DeviceRun {
  ArenaAllocator arena;
  char *base = nullptr;
  std::vector<std::vector<DeviceValue>> values; ///< [micro-batch][value id]
  std::vector<char> kept;                       ///< per micro-batch
  std::vector<PendingFree> pending;
  int64_t computeCount = 0;
};

} // namespace

struct DeviceExecutor::Impl {
  Bundle bundle;
  DeviceExecutorConfig config;
  std::unique_ptr<DeviceBackend> backend;
  std::vector<std::unique_ptr<DeviceParameter>> params;
  std::unordered_map<std::string, DeviceParameter *> paramByName;
  std::vector<std::vector<DeviceParameter *>> paramsOf; ///< per device
  std::vector<GradientFusion> fusion;
  std::vector<StageLiveness> liveness;
  std::vector<unsigned> lastForward;
  std::vector<int64_t> rowOffsets;
  std::vector<DeviceMemoryLayout> layout;
  std::vector<char *> arenaBase;
  float *lossSlots = nullptr; ///< M floats on the last device
  std::vector<float> hostLosses;
  int64_t steps = 0;

  // Per step.
  DeviceBackend *issue = nullptr; ///< the backend, or the dry run's
  std::vector<DeviceRun> runs;
  std::map<MessageKey, EventId> sent;
  /// Every device's instructions in one order that issues each send before
  /// its receive (verifySchedule's).
  std::vector<ScheduleStep> issueOrder;

  std::string issueStep(const Batch *batch, bool dryRun);
  std::string issueInstr(unsigned device, const Instr &instr,
                         const Batch *batch);
  std::string issueOps(unsigned device, unsigned m, const std::vector<Op> &ops,
                       const char *section, const std::vector<std::vector<int>>
                                                *freeAfter,
                       bool backward);
  std::string issueOp(unsigned device, unsigned m, const Op &op, size_t index,
                      bool backward);
  std::string send(unsigned device, const Instr &instr);
  std::string checkModelInputs(const Batch &batch) const;

  char *allocateBlock(unsigned device, int64_t bytes, int64_t &offset);
  DeviceValue &newValue(unsigned device, unsigned m, int id,
                        std::vector<int64_t> extraBytes = {});
  void freeValue(unsigned device, DeviceValue &value);
  void releasePending(unsigned device, bool all);

  StreamId compute(unsigned d) { return issue->computeStream(d); }
  int64_t rowsOf(unsigned m) const { return bundle.microbatchRows[m]; }
};

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

char *DeviceExecutor::Impl::allocateBlock(unsigned device, int64_t bytes,
                                          int64_t &offset) {
  DeviceRun &run = runs[device];
  offset = run.arena.allocate(bytes);
  assert(offset >= 0 && "the placement of the dry run fits the arena");
  return run.base ? run.base + offset : nullptr;
}

DeviceValue &DeviceExecutor::Impl::newValue(unsigned device, unsigned m,
                                            int id,
                                            std::vector<int64_t> extraBytes) {
  const ValueSpec &spec = bundle.stages[device].values[id];
  DeviceValue &value = runs[device].values[m][id];
  assert(!value.present && "a value is defined once per micro-batch");
  value = DeviceValue();
  value.shape = spec.shape;
  if (spec.batched)
    value.shape[0] = rowsOf(m);
  int64_t mainBytes = ArenaAllocator::roundUp(value.numElements() * 4);
  int64_t total = mainBytes;
  for (int64_t extra : extraBytes)
    total += ArenaAllocator::roundUp(extra);
  value.data = allocateBlock(device, total, value.offset);
  int64_t at = mainBytes;
  for (size_t k = 0; k < extraBytes.size(); ++k) {
    value.saved[k] = value.data ? value.data + at : nullptr;
    at += ArenaAllocator::roundUp(extraBytes[k]);
  }
  value.present = true;
  return value;
}

void DeviceExecutor::Impl::freeValue(unsigned device, DeviceValue &value) {
  if (!value.present)
    return;
  DeviceRun &run = runs[device];
  if (value.offset >= 0) {
    if (value.readByCopy)
      run.pending.push_back(
          {value.offset, value.copyDone, run.computeCount + 2});
    else
      run.arena.free(value.offset);
  }
  bool reserved = value.reserved;
  char *data = value.data;
  std::vector<int64_t> shape = value.shape;
  value = DeviceValue();
  if (reserved) { // the receive buffer stays for a later micro-batch's use
    value.reserved = true;
    value.data = data;
    value.shape = std::move(shape);
  }
}

void DeviceExecutor::Impl::releasePending(unsigned device, bool all) {
  DeviceRun &run = runs[device];
  std::vector<PendingFree> still;
  for (const PendingFree &p : run.pending) {
    if (!all && p.releaseAt > run.computeCount) {
      still.push_back(p);
      continue;
    }
    if (!all)
      issue->waitEvent(compute(device), p.copyDone);
    run.arena.free(p.offset);
  }
  run.pending = std::move(still);
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

std::string DeviceExecutor::Impl::issueOp(unsigned device, unsigned m,
                                          const Op &op, size_t index,
                                          bool backward) {
  const StageProgram &program = bundle.stages[device];
  std::vector<DeviceValue> &values = runs[device].values[m];
  const StreamId s = compute(device);
  DeviceBackend &b = *issue;
  std::vector<const DeviceValue *> in(op.operands.size());
  for (size_t k = 0; k < op.operands.size(); ++k) {
    in[k] = &values[op.operands[k]];
    if (!in[k]->present)
      return "operand " + std::to_string(k) + " (value " +
             std::to_string(op.operands[k]) +
             ") is not available (never defined, received or loaded, or "
             "already freed)";
  }
  auto fused = [&](size_t r) -> DeviceParameter * {
    if (!backward)
      return nullptr;
    const std::string &name = fusion[device].accumulatesInto[index][r];
    return name.empty() ? nullptr : paramByName.at(name);
  };
  // Results, with their saved state, before the kernels that write them.
  std::vector<float *> out(op.results.size(), nullptr);
  std::vector<bool> accumulateInto(op.results.size(), false);
  static const DeviceValue kNoOperand;
  const DeviceValue &x0 = in.empty() ? kNoOperand : *in[0];
  std::vector<int64_t> extra;
  if (!in.empty()) {
    SavedState state = savedStateOf(op.kind, in[0]->shape.data(),
                                    in[0]->shape.size(), op.heads);
    extra.assign(state.bytes, state.bytes + state.count);
  }
  for (size_t r = 0; r < op.results.size(); ++r) {
    int id = op.results[r];
    if (DeviceParameter *param = fused(r)) {
      out[r] = param->grad;
      accumulateInto[r] = true;
    } else if (op.kind == OpKind::Param) {
      auto it = paramByName.find(op.name);
      if (it == paramByName.end())
        return "unknown parameter '" + op.name + "'";
      DeviceValue &view = values[id];
      view = DeviceValue();
      view.shape = program.values[id].shape;
      view.data = reinterpret_cast<char *>(it->second->value);
      view.present = true;
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
  // A parameter-gradient result that is a value of its own starts at zero:
  // its kernels accumulate.
  auto zeroUnlessFused = [&](size_t r) {
    if (out[r] && !accumulateInto[r])
      b.fillZero(s, out[r], values[op.results[r]].numElements() * 4);
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
    call.qkv = reinterpret_cast<float *>(result->saved[0]);
    call.probs = reinterpret_cast<float *>(result->saved[1]);
    call.context = reinterpret_cast<float *>(result->saved[2]);
    call.batch = x0.shape[0], call.seq = x0.shape[1], call.width = x0.shape[2];
    call.heads = op.heads, call.causal = op.causal;
    b.attention(s, call);
    break;
  }
  case OpKind::Dropout: {
    int64_t rows = x0.rowsOf();
    int64_t perExample =
        program.values[op.operands[0]].batched && !x0.shape.empty()
            ? rows / x0.shape[0]
            : 0;
    b.dropout(s, f(0), out[0], reinterpret_cast<uint8_t *>(result->saved[0]),
              rows, x0.colsOf(), op.rate, op.seed, uint64_t(steps + 1),
              rowOffsets[m] * perExample);
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
  case OpKind::DenseGrad: {
    // (dy, x, w) -> (dx = dy w^T, dw += x^T dy)
    int64_t inDim = in[2]->shape[0], outDim = in[2]->shape[1];
    int64_t rows = in[1]->numElements() / inDim;
    if (out[0]) {
      GemmBatch g;
      g.transB = true;
      g.m = rows, g.n = inDim, g.k = outDim;
      g.a = f(0), g.lda = outDim, g.b = f(2), g.ldb = outDim;
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
    zeroUnlessFused(0);
    b.columnSums(s, f(0), out[0], x0.rowsOf(), x0.colsOf());
    break;
  case OpKind::ReluGrad:
    b.reluGrad(s, f(1), f(0), out[0], x0.numElements());
    break;
  case OpKind::GeluGrad:
    b.geluGrad(s, f(1), f(0), out[0], x0.numElements());
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
    zeroUnlessFused(1);
    zeroUnlessFused(2);
    b.layerNormGradParams(s, f(0), f(2), mean, rstd, out[1], out[2], rows,
                          cols);
    break;
  }
  case OpKind::EmbeddingGrad:
    zeroUnlessFused(0);
    b.embeddingGrad(s, in[1]->i(), f(0), out[0], in[1]->numElements(),
                    program.values[op.results[0]].shape[1]);
    break;
  case OpKind::AttentionGrad: {
    // (dy, forward y, x, wqkv, wo) -> (dx, dwqkv, dwo)
    const DeviceValue &forward = *in[1];
    AttentionGradCall call;
    call.dy = f(0), call.x = f(2), call.wqkv = f(3), call.wo = f(4);
    call.qkv = reinterpret_cast<const float *>(forward.saved[0]);
    call.probs = reinterpret_cast<const float *>(forward.saved[1]);
    call.context = reinterpret_cast<const float *>(forward.saved[2]);
    call.dx = out[0], call.dwqkv = out[1], call.dwo = out[2];
    call.batch = in[2]->shape[0], call.seq = in[2]->shape[1];
    call.width = in[2]->shape[2];
    call.heads = op.heads, call.causal = op.causal;
    int64_t scratchOffset;
    call.scratch = reinterpret_cast<float *>(
        allocateBlock(device,
                      4 * b.attentionGradScratch(call.batch, call.seq,
                                                 call.width, call.heads),
                      scratchOffset));
    zeroUnlessFused(1);
    zeroUnlessFused(2);
    b.attentionGrad(s, call);
    runs[device].arena.free(scratchOffset);
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
    b.accumulate(s, f(0), it->second->grad, it->second->size);
    break;
  }
  case OpKind::Zeros:
    b.fillZero(s, out[0], result->numElements() * 4);
    break;
  }
  return {};
}

std::string DeviceExecutor::Impl::issueOps(
    unsigned device, unsigned m, const std::vector<Op> &ops,
    const char *section, const std::vector<std::vector<int>> *freeAfter,
    bool backward) {
  std::vector<DeviceValue> &values = runs[device].values[m];
  for (size_t k = 0; k < ops.size(); ++k) {
    if (backward && fusion[device].skip[k])
      continue;
    std::string error = issueOp(device, m, ops[k], k, backward);
    if (!error.empty())
      return error + ", in " + section + " op " + std::to_string(k) + " (" +
             opKindName(ops[k].kind) + ")";
    for (int id : (*freeAfter)[k])
      freeValue(device, values[id]);
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

std::string DeviceExecutor::Impl::send(unsigned device, const Instr &instr) {
  const StageProgram &program = bundle.stages[device];
  DeviceRun &run = runs[device];
  const unsigned m = instr.microbatch;
  bool activation = instr.kind == InstrKind::SendActivation;
  int id = activation ? program.outputs[instr.channel]
                      : program.inputGrads[instr.channel];
  DeviceValue &value = run.values[m][id];
  if (!value.present)
    return "value " + std::to_string(id) + " is no longer available";
  // The receiver's buffer for this micro-batch and channel.
  const StageProgram &peer = bundle.stages[instr.peer];
  int peerId = -1;
  if (activation) {
    for (const StageInput &input : peer.inputs)
      if (input.fromChannel && input.channel == instr.channel)
        peerId = input.value;
  } else {
    peerId = peer.outputGrads[instr.channel];
  }
  DeviceValue &target = runs[instr.peer].values[m][peerId];
  assert(target.reserved && "every receive has a reserved buffer");
  const StreamId copy = issue->copyStream(device);
  issue->waitEvent(copy, issue->recordEvent(compute(device)));
  issue->copyBetweenDevices(copy, target.data, instr.peer, value.data, device,
                            value.numElements() * 4);
  EventId done = issue->recordEvent(copy);
  sent[MessageKey{activation ? 0 : 1, device, m, instr.channel}] = done;
  if (value.offset >= 0) {
    value.readByCopy = true;
    value.copyDone = done;
  }
  // Free it unless this device still needs it: the backward, or the send of
  // another channel that carries the same value.
  bool needed = activation &&
                liveness[device].neededAfterForward(id, run.kept[m] != 0);
  const std::vector<int> &ids = activation ? program.outputs : program.inputGrads;
  for (unsigned c = 0; c < ids.size() && !needed; ++c)
    needed = ids[c] == id &&
             !sent.count(MessageKey{activation ? 0 : 1, device, m, c});
  if (!needed)
    freeValue(device, value);
  return {};
}

std::string DeviceExecutor::Impl::issueInstr(unsigned device,
                                             const Instr &instr,
                                             const Batch *batch) {
  const StageProgram &program = bundle.stages[device];
  DeviceRun &run = runs[device];
  const unsigned m = instr.microbatch;
  switch (instr.kind) {
  case InstrKind::LoadInput: {
    for (const StageInput &input : program.inputs) {
      if (input.fromChannel || input.inputName != instr.inputName)
        continue;
      DeviceValue &value = newValue(device, m, input.value);
      if (batch) {
        const HostTensor &host = batch->at(instr.inputName);
        int64_t perRow = host.numElements() / host.shape[0];
        const void *src = host.type == ElementType::F32
                              ? static_cast<const void *>(host.f32.data())
                              : static_cast<const void *>(host.i32.data());
        issue->copyToDevice(compute(device), value.data,
                            static_cast<const char *>(src) +
                                rowOffsets[m] * perRow * 4,
                            value.numElements() * 4);
      }
    }
    return {};
  }
  case InstrKind::RecvActivation:
  case InstrKind::RecvGradient: {
    bool activation = instr.kind == InstrKind::RecvActivation;
    auto it = sent.find(
        MessageKey{activation ? 0 : 1, instr.peer, m, instr.channel});
    assert(it != sent.end() && "issued after its send");
    issue->waitEvent(compute(device), it->second);
    int id = -1;
    if (activation) {
      for (const StageInput &input : program.inputs)
        if (input.fromChannel && input.channel == instr.channel)
          id = input.value;
    } else {
      id = program.outputGrads[instr.channel];
    }
    run.values[m][id].present = true;
    return {};
  }
  case InstrKind::SendActivation:
  case InstrKind::SendGradient:
    return send(device, instr);
  case InstrKind::Forward: {
    ++run.computeCount;
    releasePending(device, false);
    for (const StageInput &input : program.inputs)
      if (!run.values[m][input.value].present)
        return input.fromChannel ? "channel " + std::to_string(input.channel) +
                                       " was not received before the forward"
                                 : "model input '" + input.inputName +
                                       "' was not loaded before the forward";
    run.kept[m] =
        keepsForwardValues(bundle.remat, m, lastForward[device]) ? 1 : 0;
    const StageLiveness &live = liveness[device];
    std::string error = issueOps(device, m, program.forward, "forward",
                                 &live.forwardFree[run.kept[m] ? 1 : 0], false);
    if (!error.empty())
      return error;
    if (program.loss >= 0)
      issue->copyBetweenDevices(compute(device), lossSlots ? lossSlots + m
                                                           : nullptr,
                                device, run.values[m][program.loss].data,
                                device, 4);
    std::vector<char> keep(program.values.size(), 0);
    for (size_t id = 0; id < keep.size(); ++id)
      keep[id] = live.neededAfterForward(int(id), run.kept[m] != 0);
    for (int id : program.outputs)
      keep[id] = 1;
    for (size_t id = 0; id < keep.size(); ++id)
      if (!keep[id])
        freeValue(device, run.values[m][id]);
    return {};
  }
  case InstrKind::Backward: {
    ++run.computeCount;
    releasePending(device, false);
    for (size_t c = 0; c < program.outputGrads.size(); ++c)
      if (!run.values[m][program.outputGrads[c]].present)
        return "the gradient of channel " + std::to_string(c) +
               " was not received before the backward";
    const StageLiveness &live = liveness[device];
    if (!run.kept[m]) {
      std::string error = issueOps(device, m, program.recompute, "recompute",
                                   &live.recomputeFree, false);
      if (!error.empty())
        return error;
    }
    std::string error = issueOps(device, m, program.backward, "backward",
                                 &live.backwardFree[run.kept[m] ? 1 : 0], true);
    if (!error.empty())
      return error;
    std::vector<char> keep(program.values.size(), 0);
    for (int id : program.inputGrads)
      keep[id] = 1;
    for (size_t id = 0; id < keep.size(); ++id)
      if (!keep[id])
        freeValue(device, run.values[m][id]);
    return {};
  }
  case InstrKind::OptimizerStep: {
    ++run.computeCount;
    const StreamId s = compute(device);
    for (DeviceParameter *param : paramsOf[device])
      issue->optimizerStep(s, config.optimizer, param->value, param->grad,
                           param->slots, param->size, steps + 1);
    return {};
  }
  }
  return {};
}

/// Issues one step: every device's program, in an order in which each send
/// is issued before its receive; the optimizer steps once every device has
/// reached its own.
std::string DeviceExecutor::Impl::issueStep(const Batch *batch, bool dryRun) {
  const unsigned numDevices = bundle.stages.size();
  const unsigned numMicrobatches = bundle.microbatchRows.size();
  runs.clear();
  runs.resize(numDevices);
  sent.clear();
  for (unsigned d = 0; d < numDevices; ++d) {
    DeviceRun &run = runs[d];
    run.arena =
        dryRun ? ArenaAllocator() : ArenaAllocator(layout[d].arenaBytes);
    run.base = dryRun ? nullptr : arenaBase[d];
    run.values.assign(numMicrobatches, std::vector<DeviceValue>(
                                           bundle.stages[d].values.size()));
    run.kept.assign(numMicrobatches, 0);
    for (DeviceParameter *param : paramsOf[d])
      issue->fillZero(compute(d), param->grad, param->size * 4);
  }
  // Receive buffers, reserved for the whole step.
  for (unsigned d = 0; d < numDevices; ++d) {
    const StageProgram &program = bundle.stages[d];
    for (const Instr &instr : bundle.programs[d]) {
      if (instr.kind != InstrKind::RecvActivation &&
          instr.kind != InstrKind::RecvGradient)
        continue;
      int id = -1;
      if (instr.kind == InstrKind::RecvActivation) {
        for (const StageInput &input : program.inputs)
          if (input.fromChannel && input.channel == instr.channel)
            id = input.value;
      } else {
        id = program.outputGrads[instr.channel];
      }
      DeviceValue &value = newValue(d, instr.microbatch, id);
      value.present = false;
      value.reserved = true;
      value.offset = -1; // freed with the step, not by the liveness rules
    }
  }

  // validateBundle proved this order: every receive follows its send.
  for (const ScheduleStep &step : issueOrder) {
    const Instr &instr = bundle.programs[step.device][step.index];
    std::string error = issueInstr(step.device, instr, batch);
    if (!error.empty())
      return "device " + std::to_string(step.device) + ": op #" +
             std::to_string(step.index) + " (" +
             describeInstruction(instr, step.device) + "): " + error;
  }
  for (unsigned d = 0; d < numDevices; ++d)
    releasePending(d, true);
  return {};
}

/// Ids and labels come from the batch, so they are checked here, on the
/// host, with the CPU executor's messages, before anything is issued.
std::string DeviceExecutor::Impl::checkModelInputs(const Batch &batch) const {
  for (unsigned d = 0; d < bundle.stages.size(); ++d) {
    const StageProgram &program = bundle.stages[d];
    for (size_t k = 0; k < program.forward.size(); ++k) {
      const Op &op = program.forward[k];
      int operand;
      int64_t limit;
      const char *what;
      if (op.kind == OpKind::Embedding) {
        operand = op.operands[0];
        limit = program.values[op.operands[1]].shape[0];
        what = "embedding id ";
      } else if (op.kind == OpKind::SoftmaxCrossEntropy) {
        operand = op.operands[1];
        limit = program.values[op.operands[0]].shape.back();
        what = "label ";
      } else {
        continue;
      }
      const StageInput *source = nullptr;
      for (const StageInput &input : program.inputs)
        if (input.value == operand && !input.fromChannel)
          source = &input;
      if (!source)
        continue; // validateBundle: i32 values are model inputs
      const HostTensor &host = batch.at(source->inputName);
      int64_t perRow = host.numElements() / host.shape[0];
      for (unsigned m = 0; m < bundle.microbatchRows.size(); ++m)
        for (int64_t p = 0; p < rowsOf(m) * perRow; ++p) {
          int32_t v = host.i32[rowOffsets[m] * perRow + p];
          if (v >= 0 && v < limit)
            continue;
          size_t at = 0;
          const std::vector<Instr> &instrs = bundle.programs[d];
          while (at < instrs.size() &&
                 !(instrs[at].kind == InstrKind::Forward &&
                   instrs[at].microbatch == m))
            ++at;
          return "device " + std::to_string(d) + ": op #" +
                 std::to_string(at) + " (" +
                 describeInstruction(instrs[at], d) + "): " + what +
                 std::to_string(v) + " outside [0, " + std::to_string(limit) +
                 ") at position " + std::to_string(p) +
                 " of the micro-batch, in forward op " + std::to_string(k) +
                 " (" + opKindName(op.kind) + ")";
        }
    }
  }
  return {};
}

//===----------------------------------------------------------------------===//
// The executor
//===----------------------------------------------------------------------===//

DeviceExecutor::DeviceExecutor(std::unique_ptr<Impl> impl)
    : impl(std::move(impl)) {}

DeviceExecutor::~DeviceExecutor() = default;

std::unique_ptr<DeviceExecutor>
DeviceExecutor::create(Bundle bundle, std::unique_ptr<DeviceBackend> backend,
                       const DeviceExecutorConfig &config,
                       std::string &error) {
  error = validateBundle(bundle);
  if (!error.empty())
    return nullptr;
  const unsigned numDevices = bundle.stages.size();
  if (!backend || backend->numDevices() != numDevices) {
    error = "the bundle has " + std::to_string(numDevices) +
            " pipeline devices, the backend " +
            (backend ? std::to_string(backend->numDevices()) : "is missing");
    return nullptr;
  }
  if (config.stepTimeout.count() <= 0) {
    error = "expects a positive step timeout, got " +
            std::to_string(config.stepTimeout.count()) + " ms";
    return nullptr;
  }
  auto impl = std::make_unique<Impl>();
  Impl &s = *impl;
  s.config = config;
  s.backend = std::move(backend);
  s.bundle = std::move(bundle);
  const Bundle &b = s.bundle;
  error = verifySchedule(b, &s.issueOrder);
  if (!error.empty())
    return nullptr;
  s.paramsOf.resize(numDevices);
  s.layout.resize(numDevices);
  const unsigned numSlots = optimizerSlots(config.optimizer.kind);
  for (const ParamSpec &spec : b.params) {
    auto param = std::make_unique<DeviceParameter>();
    param->spec = spec;
    param->device = spec.stage;
    param->size = product(spec.shape);
    s.layout[spec.stage].residentBytes +=
        ArenaAllocator::roundUp(param->size * 4) * (2 + numSlots);
    s.paramsOf[spec.stage].push_back(param.get());
    s.paramByName[spec.name] = param.get();
    s.params.push_back(std::move(param));
  }
  const unsigned numMicrobatches = b.microbatchRows.size();
  s.layout.back().residentBytes += ArenaAllocator::roundUp(numMicrobatches * 4);
  for (unsigned d = 0; d < numDevices; ++d) {
    s.fusion.push_back(fuseGradientAccumulation(b.stages[d]));
    s.liveness.push_back(computeLiveness(b.stages[d], s.fusion[d].skip));
    unsigned last = 0;
    for (const Instr &instr : b.programs[d])
      if (instr.kind == InstrKind::Forward)
        last = instr.microbatch;
    s.lastForward.push_back(last);
  }
  int64_t offset = 0;
  for (int64_t rows : b.microbatchRows) {
    s.rowOffsets.push_back(offset);
    offset += rows;
  }

  // The placement: one step against the dry-run backend.
  NullBackend dry(numDevices);
  s.issue = &dry;
  error = s.issueStep(nullptr, true);
  if (!error.empty())
    return nullptr;
  for (unsigned d = 0; d < numDevices; ++d) {
    s.layout[d].arenaBytes = s.runs[d].arena.highWater();
    if (d < b.memoryPlan.devices.size())
      s.layout[d].plannedArenaBytes = b.memoryPlan.devices[d].arenaBytes;
  }

  // Device memory, then the parameters, initialized as the CPU executor does.
  s.issue = s.backend.get();
  std::vector<char *> resident(numDevices, nullptr);
  for (unsigned d = 0; d < numDevices; ++d) {
    void *arena = nullptr, *res = nullptr;
    error = s.backend->allocate(d, s.layout[d].arenaBytes, &arena);
    if (error.empty())
      error = s.backend->allocate(d, s.layout[d].residentBytes, &res);
    if (!error.empty())
      return nullptr;
    s.arenaBase.push_back(static_cast<char *>(arena));
    resident[d] = static_cast<char *>(res);
  }
  std::vector<int64_t> used(numDevices, 0);
  auto take = [&](unsigned d, int64_t elements) {
    float *p = reinterpret_cast<float *>(resident[d] + used[d]);
    used[d] += ArenaAllocator::roundUp(elements * 4);
    return p;
  };
  std::vector<std::vector<float>> initial;
  for (auto &param : s.params) {
    unsigned d = param->device;
    param->value = take(d, param->size);
    param->grad = take(d, param->size);
    for (unsigned k = 0; k < numSlots; ++k) {
      param->slots[k] = take(d, param->size);
      s.backend->fillZero(s.backend->computeStream(d), param->slots[k],
                          param->size * 4);
    }
    initial.emplace_back(param->size);
    initializeParameter(param->spec.init, param->spec.scale,
                        param->spec.shape, config.seed, param->spec.name,
                        initial.back().data());
    s.backend->copyToDevice(s.backend->computeStream(d), param->value,
                            initial.back().data(), param->size * 4);
  }
  s.lossSlots = take(numDevices - 1, numMicrobatches);
  error = s.backend->synchronize(config.stepTimeout);
  if (!error.empty())
    return nullptr;
  return std::unique_ptr<DeviceExecutor>(new DeviceExecutor(std::move(impl)));
}

StepResult DeviceExecutor::trainStep(const Batch &batch) {
  Impl &s = *impl;
  StepResult result;
  result.error = checkBatch(s.bundle, batch, s.bundle.batch);
  if (result.error.empty())
    result.error = s.checkModelInputs(batch);
  if (result.error.empty())
    result.error = s.backend->error();
  if (!result.error.empty())
    return result;
  s.issue = s.backend.get();
  result.error = s.issueStep(&batch, false);
  const unsigned numMicrobatches = s.bundle.microbatchRows.size();
  s.hostLosses.assign(numMicrobatches, 0.0f);
  const unsigned last = s.bundle.stages.size() - 1;
  if (result.error.empty())
    s.backend->copyToHost(s.backend->computeStream(last), s.hostLosses.data(),
                          s.lossSlots, numMicrobatches * 4);
  std::string syncError = s.backend->synchronize(s.config.stepTimeout);
  if (result.error.empty())
    result.error = syncError;
  if (!result.error.empty())
    return result;
  ++s.steps;
  for (unsigned m = 0; m < numMicrobatches; ++m) {
    double loss = s.hostLosses[m];
    result.microbatchLosses.push_back(loss);
    result.loss += double(s.bundle.microbatchRows[m]) /
                   double(s.bundle.batch) * loss;
  }
  return result;
}

static std::string copyBack(DeviceBackend &backend, unsigned device,
                            const float *src, int64_t n,
                            std::vector<float> &values,
                            std::chrono::milliseconds timeout) {
  values.assign(n, 0.0f);
  backend.copyToHost(backend.computeStream(device), values.data(), src, n * 4);
  return backend.synchronize(timeout);
}

std::string DeviceExecutor::parameter(const std::string &name,
                                      std::vector<float> &values) {
  auto it = impl->paramByName.find(name);
  if (it == impl->paramByName.end())
    return "unknown parameter '" + name + "'";
  return copyBack(*impl->backend, it->second->device, it->second->value,
                  it->second->size, values, impl->config.stepTimeout);
}

std::string DeviceExecutor::gradient(const std::string &name,
                                     std::vector<float> &values) {
  auto it = impl->paramByName.find(name);
  if (it == impl->paramByName.end())
    return "unknown parameter '" + name + "'";
  return copyBack(*impl->backend, it->second->device, it->second->grad,
                  it->second->size, values, impl->config.stepTimeout);
}

std::string DeviceExecutor::setParameter(const std::string &name,
                                         const std::vector<float> &values) {
  auto it = impl->paramByName.find(name);
  if (it == impl->paramByName.end())
    return "unknown parameter '" + name + "'";
  if (int64_t(values.size()) != it->second->size)
    return "parameter '" + name + "' has " + std::to_string(it->second->size) +
           " elements, got " + std::to_string(values.size());
  DeviceBackend &backend = *impl->backend;
  backend.copyToDevice(backend.computeStream(it->second->device),
                       it->second->value, values.data(), it->second->size * 4);
  return backend.synchronize(impl->config.stepTimeout);
}

int64_t DeviceExecutor::stepsDone() const { return impl->steps; }

void DeviceExecutor::setLearningRate(float learningRate) {
  impl->config.optimizer.learningRate = learningRate;
}

const Bundle &DeviceExecutor::bundle() const { return impl->bundle; }

DeviceBackend &DeviceExecutor::backend() { return *impl->backend; }

const std::vector<DeviceMemoryLayout> &DeviceExecutor::memory() const {
  return impl->layout;
}
