//===- ProgramBuilder.h - Appends instructions to a device program -*- C++
//-*-===//
//
// Shared by the schedule builders (PipelineSchedule.cpp, ScheduleKinds.cpp):
// the one place an Instr of each kind is filled in.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_LIB_ANALYSIS_PROGRAMBUILDER_H
#define GPIPE_LIB_ANALYSIS_PROGRAMBUILDER_H

#include "gpipe/Analysis/PipelineSchedule.h"

namespace gpipe::schedule {
/// Appends the instructions of one device's program.
class ProgramBuilder {
public:
  ProgramBuilder(DeviceProgram &program, const std::vector<int64_t> &rows)
      : program(program), rows(rows) {}

  void addCompute(InstrKind kind, unsigned stage, unsigned microbatch) {
    Instr instr;
    instr.kind = kind;
    instr.stage = stage;
    instr.microbatch = microbatch;
    instr.rows = rows[microbatch];
    program.instrs.push_back(std::move(instr));
  }

  void addLoad(const std::string &name, unsigned stage, unsigned microbatch) {
    Instr instr;
    instr.kind = InstrKind::LoadInput;
    instr.stage = stage;
    instr.microbatch = microbatch;
    instr.inputName = name;
    instr.rows = rows[microbatch];
    program.instrs.push_back(std::move(instr));
  }

  /// One Send or Recv per tensor of `boundary`, in channel order, so that
  /// both ends of a boundary see the channels in the same order (required
  /// under rendezvous semantics). `stage`: this device's end of it.
  void addTransfers(InstrKind kind, Direction direction, unsigned stage,
                    unsigned peer, const std::vector<BoundaryTensor> &boundary,
                    unsigned microbatch) {
    for (std::size_t c = 0, e = boundary.size(); c != e; ++c) {
      Instr instr;
      instr.kind = kind;
      instr.stage = stage;
      instr.microbatch = microbatch;
      instr.peer = peer;
      instr.channel = static_cast<unsigned>(c);
      instr.direction = direction;
      instr.shape = boundary[c].shape;
      // Boundary shapes are at the full batch; dimension 0 is the batch.
      if (!instr.shape.empty())
        instr.shape[0] = rows[microbatch];
      instr.elementType = boundary[c].elementType;
      instr.rows = rows[microbatch];
      program.instrs.push_back(std::move(instr));
    }
  }

  void addOptimizerStep() {
    Instr instr;
    instr.kind = InstrKind::OptimizerStep;
    program.instrs.push_back(std::move(instr));
  }

private:
  DeviceProgram &program;
  const std::vector<int64_t> &rows;
};

} // namespace gpipe::schedule

#endif // GPIPE_LIB_ANALYSIS_PROGRAMBUILDER_H
