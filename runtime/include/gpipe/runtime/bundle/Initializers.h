//===- Initializers.h - Deterministic parameter initializers ----*- C++ -*-===//
//
// The initial values of a parameter depend only on (seed, parameter name,
// element index): each element is drawn from a counter-based generator
// (splitmix64 keyed by the seed and a hash of the name), so the same parameter
// gets bit-identical values whichever stage or device holds it, in whatever
// order and on whatever thread parameters are initialized.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_INITIALIZERS_H
#define GPIPE_RUNTIME_INITIALIZERS_H

#include <cstdint>
#include <string>
#include <vector>

namespace gpipe::runtime {

/// The initializers of `gpipe.param`, in the order of the dialect's InitKind.
/// Pretrained values come from the bundle's weights file (Bundle::weights),
/// which the executor reads; initializeParameter never produces them.
enum class InitKind { Zeros, Ones, Normal, Uniform, GlorotUniform, Pretrained };

/// Fills `out` (the product of `shape` floats, row-major) with the initial
/// values of parameter `name`:
///   - Zeros, Ones: the constant;
///   - Normal: mean 0, standard deviation `scale` (Box-Muller);
///   - Uniform: U(-scale, scale);
///   - GlorotUniform: U(-l, l) with l = sqrt(6 / (fanIn + fanOut)); for rank 2
///     (weights are [in, out]) fanIn = shape[0] and fanOut = shape[1], for
///     rank 4 (conv2d's [KH, KW, in, out]) fanIn = KH KW in and fanOut =
///     KH KW out, for any other rank fanIn = fanOut = the number of elements.
/// `scale` is ignored by Zeros, Ones and GlorotUniform. Deterministic from
/// (kind, scale, shape, seed, name); every dimension must be non-negative.
/// `kind` must not be Pretrained: a programming error, which aborts (the
/// values are in a file; see Bundle::weights).
void initializeParameter(InitKind kind, double scale,
                         const std::vector<int64_t> &shape, uint64_t seed,
                         const std::string &name, float *out);

/// The bound l of GlorotUniform for `shape` (see initializeParameter).
double glorotUniformLimit(const std::vector<int64_t> &shape);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_INITIALIZERS_H
