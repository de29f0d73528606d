//===- Profile.h - Measured instruction costs for the simulator -*- C++ -*-===//
//
// A profile is what one measured step says each device's instructions cost:
// per row of a micro-batch for forwards, backwards (recomputation taken out)
// and input loads, per event for sends, receives and the optimizer step, and
// the host work of the step around the devices' programs. gpipe-run --profile
// writes it; gpipe-report --simulate and gpipe-tune read it
// (docs/Schedules.md, "Profiles"). Its `devices` has one entry per stage:
// under interleaving (`virtual_stages` V > 1) device d's stages d, d + K, ...
// each get the events that served them and a V-th of its optimizer step.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_PROFILE_H
#define GPIPE_RUNTIME_PROFILE_H

#include "gpipe/runtime/bundle/Bundle.h"
#include "gpipe/runtime/exec/Timeline.h"

#include <string>

namespace gpipe::runtime {

/// The profile JSON of `bundle`'s step recorded in `timeline`.
std::string profileJson(const Bundle &bundle, const Timeline &timeline);

/// Writes profileJson to `path`; returns "" or why it could not.
std::string writeProfile(const std::string &path, const Bundle &bundle,
                         const Timeline &timeline);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_PROFILE_H
