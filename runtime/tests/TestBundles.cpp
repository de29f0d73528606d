//===- TestBundles.cpp - Builds pipeline bundles for the executor tests ---===//

#include "TestBundles.h"
#include "TestPlacement.h"

#include "gpipe/Analysis/ScheduleKinds.h"
#include "gpipe/runtime/bundle/BackwardSplit.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;

[[noreturn]] static void fatal(const std::string &message) {
  std::fprintf(stderr, "TestBundles: %s\n", message.c_str());
  std::abort();
}

//===----------------------------------------------------------------------===//
// ModelGraph
//===----------------------------------------------------------------------===//

int ModelGraph::newValue(std::vector<int64_t> shape, ElementType type,
                         bool batched) {
  values.push_back({std::move(shape), type, batched});
  return int(values.size()) - 1;
}

int ModelGraph::emit(OpKind kind, std::vector<int> operands, ValueSpec result) {
  int id = newValue(result.shape, result.type, result.batched);
  GraphOp graphOp;
  graphOp.op.kind = kind;
  graphOp.op.operands = std::move(operands);
  graphOp.op.results = {id};
  graphOp.layer = layer;
  ops.push_back(graphOp);
  return id;
}

int ModelGraph::input(const std::string &name, std::vector<int64_t> shape,
                      ElementType type) {
  if (shape.empty() || shape[0] != batch)
    fatal("input '" + name + "' must have the batch as dimension 0");
  inputs.push_back({name, shape, type});
  int id = newValue(shape, type, true);
  inputValues.push_back(id);
  return id;
}

int ModelGraph::param(const std::string &name, std::vector<int64_t> shape,
                      InitKind init, double scale) {
  ParamSpec spec;
  spec.name = name;
  spec.shape = shape;
  spec.init = init;
  spec.scale = scale;
  params.push_back(spec);
  int id = emit(OpKind::Param, {}, {shape, ElementType::F32, false});
  ops.back().op.name = name;
  return id;
}

int ModelGraph::dense(int x, int w, int b) {
  ValueSpec y = values[x];
  y.shape.back() = values[w].shape[1];
  std::vector<int> operands = {x, w};
  if (b >= 0)
    operands.push_back(b);
  return emit(OpKind::Dense, operands, y);
}

int ModelGraph::unary(OpKind kind, int x) { return emit(kind, {x}, values[x]); }

int ModelGraph::layerNorm(int x, int gamma, int beta, float epsilon) {
  int y = emit(OpKind::LayerNorm, {x, gamma, beta}, values[x]);
  ops.back().op.epsilon = epsilon;
  return y;
}

int ModelGraph::add(int a, int b) {
  return emit(OpKind::Add, {a, b}, values[a]);
}

int ModelGraph::embedding(int ids, int table) {
  ValueSpec y = values[ids];
  y.type = ElementType::F32;
  y.shape.push_back(values[table].shape[1]);
  return emit(OpKind::Embedding, {ids, table}, y);
}

int ModelGraph::attention(int x, int wqkv, int wo, int64_t heads, bool causal,
                          int bqkv, int bo) {
  std::vector<int> operands = {x, wqkv, wo};
  if (bqkv >= 0)
    operands.insert(operands.end(), {bqkv, bo});
  int y = emit(OpKind::Attention, operands, values[x]);
  ops.back().op.heads = heads;
  ops.back().op.causal = causal;
  return y;
}

int ModelGraph::dropout(int x, float rate, uint64_t seed) {
  int y = emit(OpKind::Dropout, {x}, values[x]);
  ops.back().op.rate = rate;
  ops.back().op.seed = seed;
  return y;
}

int ModelGraph::conv2d(int x, int w, int b, const WindowAttrs &attrs) {
  const ValueSpec &in = values[x];
  WindowGeometry g =
      convGeometryOf(in.shape.data(), values[w].shape.data(), attrs);
  std::vector<int> operands = {x, w};
  if (b >= 0)
    operands.push_back(b);
  int y = emit(
      OpKind::Conv2d, operands,
      {{g.batch, g.outHeight, g.outWidth, g.filters}, ElementType::F32, true});
  // conv2d's window is its weight's; the bundle carries none.
  ops.back().op.window = attrs;
  ops.back().op.window.window[0] = ops.back().op.window.window[1] = 1;
  return y;
}

int ModelGraph::pool2d(OpKind kind, int x, const WindowAttrs &attrs) {
  WindowGeometry g = poolGeometryOf(values[x].shape.data(), attrs);
  int y = emit(
      kind, {x},
      {{g.batch, g.outHeight, g.outWidth, g.channels}, ElementType::F32, true});
  ops.back().op.window = attrs;
  return y;
}

int ModelGraph::batchNorm(int x, int gamma, int beta, int mean, int variance,
                          float momentum) {
  int y = emit(OpKind::BatchNorm, {x, gamma, beta, mean, variance}, values[x]);
  ops.back().op.momentum = momentum;
  return y;
}

int ModelGraph::globalAvgPool(int x) {
  const std::vector<int64_t> &shape = values[x].shape;
  return emit(OpKind::GlobalAvgPool, {x},
              {{shape[0], shape[3]}, ElementType::F32, true});
}

int ModelGraph::flatten(int x) {
  const std::vector<int64_t> &shape = values[x].shape;
  int64_t features = 1;
  for (size_t i = 1; i < shape.size(); ++i)
    features *= shape[i];
  return emit(OpKind::Flatten, {x},
              {{shape[0], features}, ElementType::F32, true});
}

int ModelGraph::softmaxCrossEntropy(int logits, int labels) {
  loss = emit(OpKind::SoftmaxCrossEntropy, {logits, labels},
              {{}, ElementType::F32, false});
  return loss;
}

int ModelGraph::mse(int prediction, int target) {
  loss = emit(OpKind::MseLoss, {prediction, target},
              {{}, ElementType::F32, false});
  return loss;
}

//===----------------------------------------------------------------------===//
// Bundle construction
//===----------------------------------------------------------------------===//

namespace {

/// Builds one stage: local value ids, forward, recompute, backward.
class StageBuilder {
public:
  StageBuilder(const ModelGraph &graph, StageProgram &program)
      : graph(graph), program(program) {}

  int local(int global) {
    auto it = toLocal.find(global);
    if (it != toLocal.end())
      return it->second;
    program.values.push_back(graph.values[global]);
    int id = int(program.values.size()) - 1;
    toLocal[global] = id;
    return id;
  }
  int fresh(const ValueSpec &spec) {
    program.values.push_back(spec);
    return int(program.values.size()) - 1;
  }

  /// Reverse mode over `program.forward`, seeded by the output gradients
  /// (and the loss, if this stage has one).
  void differentiate(const std::set<int> &noGradient) {
    std::map<int, int> grad; // local value -> its gradient value
    auto addGrad = [&](int value, int g) {
      if (g < 0 || noGradient.count(value))
        return;
      auto it = grad.find(value);
      if (it == grad.end()) {
        grad[value] = g;
        return;
      }
      Op sum;
      sum.kind = OpKind::AddGrads;
      sum.operands = {it->second, g};
      sum.results = {fresh(program.values[value])};
      program.backward.push_back(sum);
      it->second = sum.results[0];
    };
    auto emit = [&](OpKind kind, std::vector<int> operands,
                    std::vector<int> resultsLike, const Op &forward) {
      Op op;
      op.kind = kind;
      op.operands = std::move(operands);
      for (int like : resultsLike)
        op.results.push_back(like < 0 ? -1 : fresh(program.values[like]));
      op.epsilon = forward.epsilon;
      op.rate = forward.rate;
      op.seed = forward.seed;
      op.heads = forward.heads;
      op.causal = forward.causal;
      if (opInfo(kind).attrs & (ConvAttrs | PoolAttrs))
        op.window = forward.window;
      program.backward.push_back(op);
      return op.results;
    };
    auto wants = [&](int value) {
      return noGradient.count(value) ? -1 : value;
    };

    for (size_t c = 0; c < program.outputs.size(); ++c) {
      int g = fresh(program.values[program.outputs[c]]);
      program.outputGrads.push_back(g);
      addGrad(program.outputs[c], g);
    }
    for (size_t k = program.forward.size(); k-- > 0;) {
      const Op &op = program.forward[k];
      int y = op.results[0];
      const auto &x = op.operands;
      if (op.kind == OpKind::SoftmaxCrossEntropy) {
        if (y != program.loss)
          continue;
        addGrad(x[0], emit(OpKind::SoftmaxCrossEntropyGrad, {y, x[1]}, {x[0]},
                           op)[0]);
        continue;
      }
      if (op.kind == OpKind::MseLoss) {
        if (y != program.loss)
          continue;
        addGrad(x[0], emit(OpKind::MseLossGrad, {x[0], x[1]}, {x[0]}, op)[0]);
        continue;
      }
      auto it = grad.find(y);
      if (it == grad.end())
        continue;
      int dy = it->second;
      switch (op.kind) {
      case OpKind::Param: {
        Op accumulate;
        accumulate.kind = OpKind::AccumulateGrad;
        accumulate.operands = {dy};
        accumulate.name = op.name;
        program.backward.push_back(accumulate);
        break;
      }
      case OpKind::Dense: {
        auto r =
            emit(OpKind::DenseGrad, {dy, x[0], x[1]}, {wants(x[0]), x[1]}, op);
        addGrad(x[0], r[0]);
        addGrad(x[1], r[1]);
        if (x.size() == 3)
          addGrad(x[2], emit(OpKind::BiasGrad, {dy}, {x[2]}, op)[0]);
        break;
      }
      case OpKind::Relu:
        addGrad(x[0], emit(OpKind::ReluGrad, {dy, x[0]}, {x[0]}, op)[0]);
        break;
      case OpKind::Gelu:
        addGrad(x[0], emit(OpKind::GeluGrad, {dy, x[0]}, {x[0]}, op)[0]);
        break;
      case OpKind::GeluErf:
        addGrad(x[0], emit(OpKind::GeluErfGrad, {dy, x[0]}, {x[0]}, op)[0]);
        break;
      case OpKind::Tanh:
        addGrad(x[0], emit(OpKind::TanhGrad, {dy, y}, {x[0]}, op)[0]);
        break;
      case OpKind::Softmax:
        addGrad(x[0], emit(OpKind::SoftmaxGrad, {dy, y}, {x[0]}, op)[0]);
        break;
      case OpKind::Dropout:
        addGrad(x[0], emit(OpKind::DropoutGrad, {dy, y}, {x[0]}, op)[0]);
        break;
      case OpKind::LayerNorm: {
        auto r = emit(OpKind::LayerNormGrad, {dy, y, x[0], x[1]},
                      {wants(x[0]), x[1], x[2]}, op);
        addGrad(x[0], r[0]);
        addGrad(x[1], r[1]);
        addGrad(x[2], r[2]);
        break;
      }
      case OpKind::Add:
        addGrad(x[0], dy);
        addGrad(x[1], dy);
        break;
      case OpKind::Embedding:
        addGrad(x[1], emit(OpKind::EmbeddingGrad, {dy, x[0]}, {x[1]}, op)[0]);
        break;
      case OpKind::Attention: {
        // (dy, y, x, wqkv, wo[, bqkv, bo]) -> (dx, dwqkv, dwo[, dbqkv, dbo])
        std::vector<int> operands = {dy, y}, like = {wants(x[0])};
        operands.insert(operands.end(), x.begin(), x.end());
        like.insert(like.end(), x.begin() + 1, x.end());
        auto r = emit(OpKind::AttentionGrad, operands, like, op);
        for (size_t i = 0; i < x.size(); ++i)
          addGrad(x[i], r[i]);
        break;
      }
      case OpKind::Conv2d: {
        auto r =
            emit(OpKind::Conv2dGrad, {dy, x[0], x[1]}, {wants(x[0]), x[1]}, op);
        addGrad(x[0], r[0]);
        addGrad(x[1], r[1]);
        if (x.size() == 3)
          addGrad(x[2], emit(OpKind::BiasGrad, {dy}, {x[2]}, op)[0]);
        break;
      }
      case OpKind::BatchNorm: { // no gradient reaches the running statistics
        auto r = emit(OpKind::BatchNormGrad, {dy, y, x[0], x[1]},
                      {wants(x[0]), x[1], x[2]}, op);
        addGrad(x[0], r[0]);
        addGrad(x[1], r[1]);
        addGrad(x[2], r[2]);
        break;
      }
      case OpKind::MaxPool2d:
        addGrad(x[0], emit(OpKind::MaxPool2dGrad, {dy, x[0]}, {x[0]}, op)[0]);
        break;
      case OpKind::AvgPool2d:
        addGrad(x[0], emit(OpKind::AvgPool2dGrad, {dy}, {x[0]}, op)[0]);
        break;
      case OpKind::GlobalAvgPool:
        addGrad(x[0], emit(OpKind::GlobalAvgPoolGrad, {dy}, {x[0]}, op)[0]);
        break;
      case OpKind::Flatten:
        addGrad(x[0], emit(OpKind::FlattenGrad, {dy}, {x[0]}, op)[0]);
        break;
      default:
        fatal(std::string("no gradient rule for op kind ") +
              std::to_string(int(op.kind)));
      }
    }
    for (const StageInput &input : program.inputs) {
      if (!input.fromChannel)
        continue;
      auto it = grad.find(input.value);
      if (it == grad.end())
        fatal("channel " + std::to_string(input.channel) + " gets no gradient");
      if (program.inputGrads.size() <= input.channel)
        program.inputGrads.resize(input.channel + 1, -1);
      program.inputGrads[input.channel] = it->second;
    }
  }

  const ModelGraph &graph;
  StageProgram &program;
  std::map<int, int> toLocal;
};

} // namespace

Bundle testing::buildBundle(const ModelGraph &graph,
                            const std::vector<int> &firstLayers,
                            unsigned numMicrobatches, RematPolicy remat,
                            gpipe::schedule::ScheduleKind kind,
                            unsigned numVirtualStages, unsigned sendWindow) {
  const unsigned numStages = firstLayers.size();
  if (numStages == 0 || firstLayers[0] != 0)
    fatal("the first stage must start at layer 0");
  for (unsigned s = 1; s < numStages; ++s)
    if (firstLayers[s] <= firstLayers[s - 1] ||
        firstLayers[s] >= graph.numLayers())
      fatal("stage starts must increase within the layers");
  auto stageOf = [&](int layer) {
    unsigned s = 0;
    while (s + 1 < numStages && firstLayers[s + 1] <= layer)
      ++s;
    return s;
  };

  Bundle bundle;
  bundle.model = "test";
  bundle.batch = graph.batch;
  bundle.remat = remat;
  bundle.inputs = graph.inputs;
  bundle.params = graph.params;
  auto split = gpipe::schedule::splitMicrobatches(graph.batch, numMicrobatches);
  if (!split.error.empty())
    fatal(split.error);
  bundle.microbatchRows = split.rows;

  const int numValues = graph.values.size();
  std::vector<int> defStage(numValues, -1);
  std::vector<int> lastUse(numValues, -1);
  std::vector<std::set<unsigned>> useStages(numValues);
  for (const auto &graphOp : graph.ops) {
    unsigned s = stageOf(graphOp.layer);
    for (int v : graphOp.op.operands) {
      lastUse[v] = std::max(lastUse[v], int(s));
      useStages[v].insert(s);
    }
    for (int v : graphOp.op.results)
      defStage[v] = s;
    if (graphOp.op.kind == OpKind::Param)
      for (ParamSpec &param : bundle.params)
        if (param.name == graphOp.op.name)
          param.stage = s;
  }
  std::set<int> modelInputs(graph.inputValues.begin(), graph.inputValues.end());

  // channels[s]: the values crossing from stage s to s + 1.
  std::vector<std::vector<int>> channels(numStages);
  for (unsigned s = 0; s + 1 < numStages; ++s)
    for (int v = 0; v < numValues; ++v)
      if (!modelInputs.count(v) && defStage[v] >= 0 && defStage[v] <= int(s) &&
          lastUse[v] > int(s))
        channels[s].push_back(v);

  bundle.stages.resize(numStages);
  for (unsigned s = 0; s < numStages; ++s) {
    StageProgram &program = bundle.stages[s];
    StageBuilder builder(graph, program);
    std::set<int> noGradient;
    if (s > 0)
      for (size_t c = 0; c < channels[s - 1].size(); ++c) {
        StageInput input;
        input.value = builder.local(channels[s - 1][c]);
        input.channel = c;
        program.inputs.push_back(input);
      }
    for (size_t i = 0; i < graph.inputs.size(); ++i)
      if (useStages[graph.inputValues[i]].count(s)) {
        StageInput input;
        input.value = builder.local(graph.inputValues[i]);
        input.fromChannel = false;
        input.inputName = graph.inputs[i].name;
        program.inputs.push_back(input);
        noGradient.insert(input.value);
      }
    // As the compiler emits it: the params first, then the ops that do
    // work, with the pairs that run fused marked.
    std::vector<Op> work;
    for (const auto &graphOp : graph.ops) {
      if (stageOf(graphOp.layer) != s)
        continue;
      Op op = graphOp.op;
      for (int &v : op.operands)
        v = builder.local(v);
      for (int &v : op.results)
        v = builder.local(v);
      (op.kind == OpKind::Param ? program.forward : work).push_back(op);
    }
    std::vector<FusionKind> fusions = chooseFusions(
        work.size(), [&](size_t i) { return std::optional(work[i].kind); },
        [&](size_t i) {
          return work[i].operands.empty() ? -1 : work[i].operands[0];
        },
        [&](size_t i) {
          return work[i].results.empty() ? -1 : work[i].results[0];
        });
    for (size_t i = 0; i < work.size(); ++i) {
      work[i].fusion = fusions[i];
      program.forward.push_back(work[i]);
    }
    if (s + 1 < numStages)
      for (int v : channels[s])
        program.outputs.push_back(builder.local(v));
    else
      program.loss = builder.local(graph.loss);
    program.recompute = program.forward;
    builder.differentiate(noGradient);
  }
  if (gpipe::schedule::splitsBackward(kind))
    for (StageProgram &stage : bundle.stages)
      splitBackward(stage);
  bundle.programs =
      schedulePrograms(bundle, kind, numVirtualStages, sendWindow);
  bundle.sendWindow = sendWindow;
  placeBundle(bundle);
  return bundle;
}

std::vector<std::vector<Instr>>
testing::schedulePrograms(const Bundle &bundle,
                          gpipe::schedule::ScheduleKind kind,
                          unsigned numVirtualStages, unsigned sendWindow) {
  namespace sch = gpipe::schedule;
  const unsigned numStages = bundle.stages.size();
  std::string error =
      sch::checkVirtualStages(kind, numStages, numVirtualStages);
  if (!error.empty())
    fatal(error.c_str());
  sch::PipelineSpec spec;
  spec.numStages = numStages;
  spec.numVirtualStages = numVirtualStages;
  spec.numMicrobatches = bundle.microbatchRows.size();
  spec.batchSize = bundle.batch;
  spec.boundaries.resize(numStages - 1);
  spec.stageInputs.resize(numStages);
  for (unsigned s = 0; s < numStages; ++s) {
    const StageProgram &program = bundle.stages[s];
    if (s + 1 < numStages)
      for (int v : program.outputs)
        spec.boundaries[s].push_back({program.values[v].shape, "f32"});
    for (const StageInput &input : program.inputs)
      if (!input.fromChannel)
        spec.stageInputs[s].push_back(input.inputName);
  }
  sch::Program schedule = sch::buildSchedule(spec, kind);
  if (sendWindow > 0)
    sch::placeSendWaits(schedule, sendWindow);
  std::vector<std::vector<Instr>> programs(schedule.devices.size());
  for (unsigned d = 0; d < programs.size(); ++d)
    for (const sch::Instr &from : schedule.devices[d].instrs) {
      Instr instr;
      instr.stage = from.stage;
      instr.microbatch = from.microbatch;
      instr.peer = from.peer;
      instr.channel = from.channel;
      instr.inputName = from.inputName;
      bool activation = from.direction == sch::Direction::Activation;
      switch (from.kind) {
      case sch::InstrKind::LoadInput:
        instr.kind = InstrKind::LoadInput;
        break;
      case sch::InstrKind::Forward:
        instr.kind = InstrKind::Forward;
        break;
      case sch::InstrKind::Backward:
        instr.kind = InstrKind::Backward;
        break;
      case sch::InstrKind::BackwardWeights:
        instr.kind = InstrKind::BackwardWeights;
        break;
      case sch::InstrKind::Send:
        instr.kind =
            activation ? InstrKind::SendActivation : InstrKind::SendGradient;
        break;
      case sch::InstrKind::Recv:
        instr.kind =
            activation ? InstrKind::RecvActivation : InstrKind::RecvGradient;
        break;
      case sch::InstrKind::WaitSend:
        instr.kind = activation ? InstrKind::WaitSendActivation
                                : InstrKind::WaitSendGradient;
        break;
      case sch::InstrKind::OptimizerStep:
        instr.kind = InstrKind::OptimizerStep;
        break;
      }
      programs[d].push_back(instr);
    }
  return programs;
}
