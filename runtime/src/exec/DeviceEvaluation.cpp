//===- DeviceEvaluation.cpp - Forward-only passes of the device executor --===//
//
// DeviceExecutor::evaluate: the bundle's forwards on any row count, in chunks
// that reuse the training program's buffers of the first micro-batch, the
// loss op's operands copied to the host, and the non-finite guard on the
// loss.
//
//===----------------------------------------------------------------------===//

#include "exec/DeviceExecutorImpl.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

/// The evaluation pass of `rows` rows, in chunks of at most the first
/// micro-batch's rows: for each chunk, each stage in order loads its model
/// inputs, receives its channels, runs its forward and sends its outputs, in
/// the buffers its device's training program gives those instructions for
/// the first micro-batch. Chunks follow one another on each stream, so they
/// reuse the same buffers safely. Kept while the next evaluation has the same
/// rows.
std::string DeviceExecutor::Impl::prepareEvaluation(int64_t rows) {
  if (evaluation &&
      evaluation->offsets.back() + evaluation->rows.back() == rows)
    return {};
  const unsigned numDevices = bundle.numDevices();
  const unsigned numStages = bundle.stages.size();
  auto chunked = std::make_unique<IssuePass>();
  IssuePass &eval = *chunked;
  eval.evaluating = true;
  const int64_t chunk = bundle.microbatchRows.front();
  for (int64_t offset = 0; offset < rows; offset += chunk) {
    eval.offsets.push_back(offset);
    eval.rows.push_back(std::min(chunk, rows - offset));
  }
  evaluationPrograms.assign(numDevices, {});
  eval.programs = &evaluationPrograms;
  eval.planInstr.assign(numDevices, {});
  for (unsigned c = 0; c < eval.rows.size(); ++c) {
    for (unsigned st = 0; st < numStages; ++st) {
      const unsigned d = bundle.deviceOfStage(st);
      const StageProgram &stage = bundle.stages[st];
      const std::vector<Instr> &trained = bundle.programs[d];
      std::vector<Instr> &program = evaluationPrograms[d];
      // The instruction of micro-batch 0 of this stage in the training
      // program that matches `kind` (and channel or input), whose buffers it
      // takes.
      auto add = [&](InstrKind kind, unsigned peer, unsigned channel,
                     const std::string &name) -> std::string {
        size_t at = 0;
        while (at < trained.size() &&
               !(trained[at].kind == kind && trained[at].microbatch == 0 &&
                 trained[at].stage == st &&
                 (kind == InstrKind::Forward ||
                  (kind == InstrKind::LoadInput
                       ? trained[at].inputName == name
                       : trained[at].channel == channel))))
          ++at;
        if (at == trained.size())
          return "device " + std::to_string(d) + " has no " +
                 instructionName(kind) + " of stage " + std::to_string(st) +
                 ", micro-batch 0 to evaluate with";
        Instr instr = trained[at];
        instr.microbatch = c;
        instr.peer = peer;
        eval.order.push_back({d, program.size()});
        eval.planInstr[d].push_back(at);
        program.push_back(std::move(instr));
        return {};
      };
      std::vector<std::string> loaded;
      std::string error;
      for (const StageInput &input : stage.inputs) {
        if (!error.empty())
          break;
        if (input.fromChannel)
          error = add(InstrKind::RecvActivation, bundle.deviceOfStage(st - 1),
                      input.channel, "");
        else if (std::find(loaded.begin(), loaded.end(), input.inputName) ==
                 loaded.end()) {
          loaded.push_back(input.inputName);
          error = add(InstrKind::LoadInput, 0, 0, input.inputName);
        }
      }
      if (error.empty())
        error = add(InstrKind::Forward, 0, 0, "");
      for (unsigned ch = 0; ch < stage.outputs.size() && error.empty(); ++ch)
        error = add(InstrKind::SendActivation, bundle.deviceOfStage(st + 1), ch,
                    "");
      if (!error.empty())
        return error;
    }
  }
  if (!evaluation) {
    // Once, at creation: one chunk checks every buffer an evaluation uses.
    std::string error = verifyPass(eval);
    if (!error.empty())
      return "evaluation: " + error;
  }
  evaluation = std::move(chunked);
  return {};
}

void DeviceExecutor::Impl::copyEvaluationOutputs(unsigned m) {
  if (issue != backend.get())
    return; // the placement check copies nothing
  const unsigned lastStage = bundle.stages.size() - 1;
  const unsigned last = bundle.deviceOfStage(lastStage);
  const StageProgram &stage = bundle.stages.back();
  const StreamId s = compute(last);
  const std::vector<DeviceValue> &values =
      runs[last].values[bundle.localStage(lastStage)][m];
  issue->copyToHost(s, &evaluationLosses[m], values[stage.loss].data, 4);
  for (const Op &op : stage.forward) {
    if (op.results.empty() || op.results[0] != stage.loss)
      continue;
    for (size_t k = 0; k < 2 && k < op.operands.size(); ++k) {
      const DeviceValue &value = values[op.operands[k]];
      HostTensor &host = evaluationOutputs[k];
      // Batched values fill their rows of the whole evaluation; others are
      // the same in every chunk.
      int64_t perRow = value.numElements() / rowsOf(m);
      int64_t at = stage.values[op.operands[k]].batched
                       ? pass->offsets[m] * perRow * 4
                       : 0;
      char *dst = host.type == ElementType::F32
                      ? reinterpret_cast<char *>(host.f32.data())
                      : reinterpret_cast<char *>(host.i32.data());
      issue->copyToHost(s, dst + at, value.data, value.numElements() * 4);
    }
  }
}

std::string DeviceExecutor::Impl::shareEvaluationOutputs() {
  const unsigned last = bundle.deviceOfStage(bundle.stages.size() - 1);
  std::string error =
      transport->shareFrom(last, evaluationLosses.data(),
                           int64_t(evaluationLosses.size()) * 4, "the losses");
  for (HostTensor &host : evaluationOutputs) {
    if (!error.empty())
      break;
    if (host.type == ElementType::F32)
      error = transport->shareFrom(last, host.f32.data(),
                                   int64_t(host.f32.size()) * 4, "outputs");
    else
      error = transport->shareFrom(last, host.i32.data(),
                                   int64_t(host.i32.size()) * 4, "outputs");
  }
  return error;
}

EvalResult DeviceExecutor::evaluate(const Batch &batch, int64_t rows) {
  Impl &s = *impl;
  EvalResult result;
  if (rows < 1) {
    result.error =
        "evaluate: expects at least 1 row, got " + std::to_string(rows);
    return result;
  }
  result.error =
      checkBatch(s.bundle, batch, rows,
                 [this](const std::string &name) { return usesInput(name); });
  s.rowBase = 0; // every replica evaluates every row
  if (result.error.empty())
    result.error = s.prepareEvaluation(rows);
  if (result.error.empty()) {
    s.pass = s.evaluation.get();
    result.error = s.checkModelInputs(batch);
  }
  if (result.error.empty())
    result.error = s.backend->error();
  if (!result.error.empty()) {
    result.error = "evaluate: " + result.error;
    return result;
  }
  // Host room for every chunk's outputs before any copy is queued.
  const StageProgram &stage = s.bundle.stages.back();
  s.evaluationLosses.assign(s.evaluation->rows.size(), 0.0f);
  for (const Op &op : stage.forward) {
    if (op.results.empty() || op.results[0] != stage.loss)
      continue;
    for (size_t k = 0; k < 2 && k < op.operands.size(); ++k) {
      const ValueSpec &spec = stage.values[op.operands[k]];
      HostTensor &host = s.evaluationOutputs[k];
      host = HostTensor();
      host.type = spec.type;
      host.shape = spec.shape;
      if (spec.batched)
        host.shape[0] = rows;
      if (host.type == ElementType::F32)
        host.f32.assign(product(host.shape), 0.0f);
      else
        host.i32.assign(product(host.shape), 0);
    }
  }
  s.transport->beginPass("the evaluation after step " +
                         std::to_string(s.steps));
  bool timeline = s.config.recordTimeline;
  s.config.recordTimeline = false; // the timeline is the training step's
  result.error = s.runPass(*s.evaluation, batch);
  s.config.recordTimeline = timeline;
  std::string syncError = s.synchronizePass();
  if (result.error.empty())
    result.error = syncError;
  if (result.error.empty())
    result.error = s.shareEvaluationOutputs();
  if (!result.error.empty()) {
    result.error = "evaluate: " + result.error;
    return result;
  }
  double loss = 0;
  for (size_t c = 0; c < s.evaluationLosses.size(); ++c) {
    const float chunkLoss = s.evaluationLosses[c];
    // The guard, as a training step's: a non-finite loss is an error, not a
    // number to report.
    if (s.config.optimizer.checkFinite && !std::isfinite(chunkLoss)) {
      const int64_t first = s.evaluation->offsets[c];
      result.nonFinite = true;
      result.error = "evaluate: the loss of rows " + std::to_string(first) +
                     " to " + std::to_string(first + s.evaluation->rows[c]) +
                     " is " + nonFiniteName(chunkLoss) +
                     " (the non-finite guard is on)";
      return result;
    }
    loss += double(s.evaluation->rows[c]) / double(rows) * double(chunkLoss);
  }
  result.loss = loss;
  result.prediction = std::move(s.evaluationOutputs[0]);
  result.target = std::move(s.evaluationOutputs[1]);
  return result;
}
