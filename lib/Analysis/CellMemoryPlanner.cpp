//===- CellMemoryPlanner.cpp - Planned memory of any cell of layers -------===//

#include "gpipe/Analysis/CellMemoryPlanner.h"
#include "gpipe/Analysis/PipelineSchedule.h"

#include <algorithm>
#include <cassert>
#include <iterator>
#include <limits>

using namespace gpipe;

namespace {

PlannedInstrKind plannedKind(const schedule::Instr &instr) {
  bool activation = instr.direction == schedule::Direction::Activation;
  switch (instr.kind) {
  case schedule::InstrKind::LoadInput:
    return PlannedInstrKind::LoadInput;
  case schedule::InstrKind::Forward:
    return PlannedInstrKind::Forward;
  case schedule::InstrKind::Backward:
    return PlannedInstrKind::Backward;
  case schedule::InstrKind::BackwardWeights:
    return PlannedInstrKind::BackwardWeights;
  case schedule::InstrKind::Send:
    return activation ? PlannedInstrKind::SendActivation
                      : PlannedInstrKind::SendGradient;
  case schedule::InstrKind::Recv:
    return activation ? PlannedInstrKind::RecvActivation
                      : PlannedInstrKind::RecvGradient;
  case schedule::InstrKind::WaitSend:
    return activation ? PlannedInstrKind::WaitSendActivation
                      : PlannedInstrKind::WaitSendGradient;
  case schedule::InstrKind::OptimizerStep:
    return PlannedInstrKind::OptimizerStep;
  }
  return PlannedInstrKind::OptimizerStep;
}

int remap(const std::vector<int> &ids, int id) {
  return id < 0 || size_t(id) >= ids.size() ? -1 : ids[id];
}

/// Whether any of `ids` is marked in `marks`.
bool anyMarked(const std::vector<int> &ids, const std::vector<char> &marks) {
  return std::any_of(ids.begin(), ids.end(), [&](int id) {
    return id >= 0 && size_t(id) < marks.size() && marks[id];
  });
}

PlannedOp remapOp(const PlannedOp &op, const std::vector<int> &ids) {
  PlannedOp out = op;
  for (int &id : out.operands)
    id = remap(ids, id);
  for (int &id : out.results)
    id = remap(ids, id);
  return out;
}

} // namespace

PlannedStage gpipe::joinStages(const std::vector<PlannedStage> &stages,
                               unsigned begin, unsigned end) {
  assert(begin < end && end <= stages.size() && "empty or out-of-range cell");
  PlannedStage out;
  auto define = [&](const ByteSize &bytes) {
    out.values.push_back(bytes);
    return int(out.values.size()) - 1;
  };
  // ids[s - begin][v]: the joined id of value v of stage s.
  std::vector<std::vector<int>> ids(end - begin);
  std::vector<std::pair<std::string, int>> loaded; // model input -> joined id
  for (unsigned s = begin; s < end; ++s) {
    const PlannedStage &stage = stages[s];
    std::vector<int> &map = ids[s - begin];
    map.assign(stage.values.size(), -1);
    for (size_t k = 0; k < stage.inputs.size(); ++k) {
      int id = stage.inputs[k];
      unsigned channel = stage.inputChannels[k];
      if (channel != ~0u && s > begin) {
        map[id] = remap(ids[s - 1 - begin], stages[s - 1].outputs.at(channel));
        continue;
      }
      if (channel == ~0u) {
        auto it = std::find_if(loaded.begin(), loaded.end(), [&](auto &entry) {
          return entry.first == stage.inputNames[k];
        });
        if (it != loaded.end()) {
          map[id] = it->second;
          continue;
        }
      }
      map[id] = define(stage.values[id]);
      if (channel == ~0u)
        loaded.emplace_back(stage.inputNames[k], map[id]);
      out.inputs.push_back(map[id]);
      out.inputChannels.push_back(channel);
      out.inputNames.push_back(stage.inputNames[k]);
    }
    // The output gradients of all but the last stage are computed inside
    // the cell; they are tied to the next stage's input gradients below.
    std::vector<char> computedInside(stage.values.size(), 0);
    if (s + 1 < end)
      for (int id : stage.outputGrads)
        computedInside[id] = 1;
    for (size_t v = 0; v < stage.values.size(); ++v)
      if (map[v] < 0 && !computedInside[v])
        map[v] = define(stage.values[v]);
    out.residentBytes += stage.residentBytes;
  }
  for (unsigned s = end - 1; s-- > begin;) {
    const PlannedStage &stage = stages[s], &next = stages[s + 1];
    for (size_t c = 0; c < stage.outputGrads.size(); ++c) {
      int grad = c < next.inputGrads.size()
                     ? remap(ids[s + 1 - begin], next.inputGrads[c])
                     : -1;
      // No gradient comes back on this channel: leave a value nothing
      // defines, so a backward that reads it fails to plan loudly.
      ids[s - begin][stage.outputGrads[c]] =
          grad >= 0 ? grad : define(stage.values[stage.outputGrads[c]]);
    }
  }

  for (unsigned s = begin; s < end; ++s)
    for (const PlannedOp &op : stages[s].forward)
      out.forward.push_back(remapOp(op, ids[s - begin]));
  for (unsigned s = end; s-- > begin;)
    for (const PlannedOp &op : stages[s].backward)
      out.backward.push_back(remapOp(op, ids[s - begin]));
  // A stage recomputes only what its own backward reads (a subsequence of
  // its forward). Joined, a later stage's backward and recompute read values
  // that were its inputs, which an earlier stage's forward defines: those
  // ops are recomputed too.
  std::vector<char> read(out.values.size(), 0);
  for (const PlannedOp &op : out.backward)
    for (int id : op.operands)
      if (id >= 0)
        read[id] = 1;
  std::vector<std::vector<PlannedOp>> recomputes(end - begin);
  for (unsigned s = end; s-- > begin;) {
    const PlannedStage &stage = stages[s];
    std::vector<PlannedOp> &ops = recomputes[s - begin];
    auto own = stage.recompute.rbegin();
    for (auto op = stage.forward.rbegin(); op != stage.forward.rend(); ++op) {
      const bool isOwn =
          own != stage.recompute.rend() && own->results == op->results;
      PlannedOp joined = remapOp(isOwn ? *own++ : *op, ids[s - begin]);
      const bool readLater = anyMarked(joined.results, read);
      if (!isOwn && !readLater)
        continue;
      for (int id : joined.operands)
        if (id >= 0)
          read[id] = 1;
      ops.push_back(std::move(joined));
    }
    std::reverse(ops.begin(), ops.end());
  }
  for (std::vector<PlannedOp> &ops : recomputes)
    std::move(ops.begin(), ops.end(), std::back_inserter(out.recompute));

  const PlannedStage &first = stages[begin], &last = stages[end - 1];
  for (int id : last.outputs)
    out.outputs.push_back(remap(ids.back(), id));
  out.loss = remap(ids.back(), last.loss);
  for (int id : last.outputGrads)
    out.outputGrads.push_back(remap(ids.back(), id));
  for (int id : first.inputGrads)
    out.inputGrads.push_back(remap(ids.front(), id));
  return out;
}

std::vector<std::vector<PlannedInstr>>
gpipe::pipelineInstructions(const std::vector<PlannedStage> &stages,
                            int64_t batch, unsigned numMicrobatches,
                            schedule::ScheduleKind kind,
                            unsigned numVirtualStages, unsigned sendWindow) {
  schedule::MicrobatchSplit split =
      schedule::splitMicrobatches(batch, numMicrobatches);
  // No W instruction to plan yet (ScheduleKinds.h): no caller passes one.
  assert(!schedule::splitsBackward(kind) &&
         "no memory plan for split backwards");
  if (!split.error.empty() || stages.empty() ||
      !schedule::checkVirtualStages(kind, stages.size(), numVirtualStages)
           .empty())
    return {};
  schedule::PipelineSpec spec;
  spec.numStages = stages.size();
  spec.numVirtualStages = numVirtualStages;
  spec.numMicrobatches = numMicrobatches;
  spec.batchSize = batch;
  for (size_t s = 0; s + 1 < stages.size(); ++s)
    spec.boundaries.push_back(std::vector<schedule::BoundaryTensor>(
        stages[s].outputs.size(), schedule::BoundaryTensor{{batch}, "f32"}));
  for (const PlannedStage &stage : stages) {
    std::vector<std::string> names;
    for (size_t i = 0; i < stage.inputs.size(); ++i)
      if (stage.inputChannels[i] == ~0u &&
          std::find(names.begin(), names.end(), stage.inputNames[i]) ==
              names.end())
        names.push_back(stage.inputNames[i]);
    spec.stageInputs.push_back(std::move(names));
  }
  std::vector<std::vector<PlannedInstr>> programs;
  schedule::Program program = schedule::buildSchedule(spec, kind);
  if (sendWindow > 0)
    schedule::placeSendWaits(program, sendWindow);
  const unsigned numDevices = program.devices.size();
  for (const schedule::DeviceProgram &device : program.devices) {
    std::vector<PlannedInstr> instrs;
    for (const schedule::Instr &instr : device.instrs)
      instrs.push_back({plannedKind(instr), instr.stage / numDevices,
                        instr.microbatch, instr.channel, instr.inputName});
    programs.push_back(std::move(instrs));
  }
  return programs;
}

std::vector<PlannedStage>
gpipe::stagesOfDevice(const std::vector<PlannedStage> &stages, unsigned device,
                      unsigned numDevices) {
  std::vector<PlannedStage> own;
  for (size_t s = device; s < stages.size(); s += numDevices)
    own.push_back(stages[s]);
  return own;
}

CellMemoryPlanner::CellMemoryPlanner(std::vector<PlannedStage> layerStages,
                                     int64_t batch, unsigned numMicrobatches,
                                     KeepPolicy keep, CellSchedule schedule)
    : layerStages(std::move(layerStages)), batch(batch),
      numMicrobatches(numMicrobatches), keep(keep), cellSchedule(schedule) {}

std::string CellMemoryPlanner::plan(unsigned begin, unsigned end,
                                    DeviceMemoryPlan &plan,
                                    bool placeBuffers) const {
  // The cell between stand-ins for the stages before and after it: only
  // their channel counts shape the cell's own program, and under 1F1B their
  // number sets its position (CellSchedule).
  const bool first = begin == 0, last = end == layerStages.size();
  unsigned before = first ? 0 : 1, after = last ? 0 : 1;
  if (cellSchedule.kind != schedule::ScheduleKind::GPipe) {
    unsigned k = std::max(cellSchedule.numStages, before + 1 + after);
    before = first ? 0 : last ? k - 1 : 1;
    after = last ? 0 : k - 1 - before;
  }
  std::vector<PlannedStage> pipeline(before);
  if (!first)
    pipeline.back().outputs.assign(layerStages[begin - 1].outputs.size(), 0);
  unsigned device = unsigned(pipeline.size());
  pipeline.push_back(joinStages(layerStages, begin, end));
  pipeline.resize(pipeline.size() + after);
  std::vector<std::vector<PlannedInstr>> programs =
      pipelineInstructions(pipeline, batch, numMicrobatches, cellSchedule.kind,
                           1, placeBuffers ? cellSchedule.sendWindow : 0);
  if (programs.empty())
    return "the batch of " + std::to_string(batch) +
           " rows cannot be split into " + std::to_string(numMicrobatches) +
           " micro-batches";
  DeviceProgram program{
      {std::move(pipeline[device])},
      std::move(programs[device]),
      schedule::splitMicrobatches(batch, numMicrobatches).rows,
      keep};
  return placeBuffers ? planDeviceMemory(program, plan)
                      : replayDeviceMemory(program, plan);
}

uint64_t CellMemoryPlanner::memoized(
    std::map<std::pair<unsigned, unsigned>, uint64_t> &memo, unsigned begin,
    unsigned end, bool arena) {
  auto [it, inserted] = memo.try_emplace({begin, end}, 0);
  if (!inserted)
    return it->second;
  DeviceMemoryPlan planned;
  std::string error = plan(begin, end, planned, arena);
  if (!error.empty()) {
    if (firstError.empty())
      firstError = "the cell of layers " + std::to_string(begin) + " to " +
                   std::to_string(end - 1) + " cannot be planned: " + error;
    return it->second = std::numeric_limits<uint64_t>::max();
  }
  return it->second =
             uint64_t(arena ? planned.arenaBytes : planned.peakBytes);
}

uint64_t CellMemoryPlanner::peakBytes(unsigned begin, unsigned end) {
  return memoized(peaks, begin, end, false);
}

uint64_t CellMemoryPlanner::arenaBytes(unsigned begin, unsigned end) {
  return memoized(arenas, begin, end, true);
}

PartitionOutcome gpipe::partitionWithPlannedMemory(PartitionProblem problem,
                                                   CellMemoryPlanner &planner) {
  problem.cellMemoryFunction = [&](unsigned begin, unsigned end) {
    return planner.peakBytes(begin, end);
  };
  auto withArenas = [&](PartitionOutcome outcome) {
    Partition &partition = *outcome.partition;
    for (size_t c = 0; c < partition.cellStarts.size(); ++c) {
      unsigned end = c + 1 < partition.cellStarts.size()
                         ? partition.cellStarts[c + 1]
                         : planner.numLayers();
      partition.cellMemory[c] = planner.arenaBytes(partition.cellStarts[c], end);
    }
    return outcome;
  };
  if (!problem.memoryCap)
    return withArenas(partitionLayers(problem));
  const uint64_t cap = *problem.memoryCap;
  uint64_t overCap = 0; // the largest arena of the last split over the cap
  for (uint64_t searchCap = cap;;) {
    problem.memoryCap = searchCap;
    PartitionOutcome outcome = partitionLayers(problem);
    if (!outcome.succeeded()) {
      if (outcome.smallestFittingCap == 0 && overCap == 0)
        return outcome; // a layer alone is too big, or bad input
      uint64_t need = overCap;
      if (overCap == 0) {
        problem.memoryCap = outcome.smallestFittingCap;
        PartitionOutcome best = partitionLayers(problem);
        if (best.succeeded()) {
          best = withArenas(std::move(best));
          for (uint64_t bytes : best.partition->cellMemory)
            need = std::max(need, bytes);
        }
      }
      PartitionOutcome refused;
      refused.smallestFittingCap = std::max(need, cap + 1);
      refused.error = "no partition into " +
                      std::to_string(problem.numCells) +
                      (problem.numCells == 1 ? " cell" : " cells") +
                      " fits the memory cap of " + std::to_string(cap) +
                      " bytes";
      return refused;
    }
    outcome = withArenas(std::move(outcome));
    uint64_t largest = 0;
    for (uint64_t bytes : outcome.partition->cellMemory)
      largest = std::max(largest, bytes);
    if (largest <= cap)
      return outcome;
    // Fragmentation pushed a cell over: ask for that much less room.
    overCap = overCap == 0 ? largest : std::min(overCap, largest);
    uint64_t excess = largest - cap;
    searchCap = searchCap > excess ? searchCap - excess : 0;
  }
}
