//===- KernelOpBuilders.h - Bundle ops rewritten as kernel ops --*- C++ -*-===//
//
// Private to lib/Target: the builders of the `kernel` op that replaces a run
// of a stage's element-wise ops (FusedKernelOp.cpp) or one op that reads or
// writes part of a value (PartialKernelOp.cpp), and what they and the run
// finder (KernelRegions.cpp) read of a bundle op.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_LIB_TARGET_KERNELOPBUILDERS_H
#define GPIPE_LIB_TARGET_KERNELOPBUILDERS_H

#include "gpipe/Target/KernelRegions.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gpipe::region_detail {

/// The ids listed under `key` of a bundle op (-1 for one that is not an
/// integer).
std::vector<int64_t> idsOf(const llvm::json::Object &op, llvm::StringRef key);

/// Whether `op` ends a run: a reduction, whose result no step of its run
/// reads (a kernel computes its steps at every point, a reduction's result
/// only once the points are all summed).
bool isReduction(const llvm::json::Object &op);

/// The axes a reduction op sums over: its `axes`, or for sum_to the
/// dimensions its result lacks or has as 1 where its operand does not
/// (aligned at the last).
std::vector<int64_t> reducedAxes(const llvm::json::Object &op,
                                 const ValueInfoFn &info);

/// Whether `op` is a kernel of its own: a reshape, whose operand's dimensions
/// do not map to its result's, or an op that reads or writes part of a
/// value (slice, slice_grad, concat), whose memrefs are not all the space.
bool isIsolated(const llvm::json::Object &op);

/// The kernel op of a slice, a slice's gradient, a concat, a gather or a
/// gather's gradient. Every memref has the dimensions of the space (the
/// shape of what the op writes, or for slice_grad and gather_grad of what it
/// reads), but a gather's indices, which have its axis (and the batch's
/// when batched); and a window along those it does not cover whole (a
/// gather's input and a gather_grad's output along the axis: their own
/// extent). Runs of adjacent dimensions that every memref covers whole and
/// has or lacks alike merge; a unit dimension goes in front when the first
/// is not whole (the first dimension is the one a batched space scales to a
/// micro-batch).
llvm::json::Object buildPartialKernelOp(const llvm::json::Object &op,
                                        const ValueInfoFn &info,
                                        KernelTable &table,
                                        std::string &problem);

/// The kernel op computing ops[first, last], or "" in `problem` why none
/// can.
llvm::json::Object buildKernelOp(const llvm::json::Array &ops, size_t first,
                                 size_t last, const ValueInfoFn &info,
                                 KernelTable &table, std::string &problem);

} // namespace gpipe::region_detail

#endif // GPIPE_LIB_TARGET_KERNELOPBUILDERS_H
