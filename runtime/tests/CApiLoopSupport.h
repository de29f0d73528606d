//===- CApiLoopSupport.h - Image files and sessions for loop tests -*- C++
//-*-===//
//
// What the tests of the C API's training loops share: 3 x 4 byte images
// written as IDX files (the Fashion-MNIST format the image loop reads), and
// an Adam session (seed 3) over a bundle.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_CAPILOOPSUPPORT_H
#define GPIPE_RUNTIME_TESTS_CAPILOOPSUPPORT_H

#include "gpipe/runtime/bundle/Bundle.h"
#include "gpipe/runtime/gpipe_runtime.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gpipe::runtime::testing::capi {

/// Images of 3 x 4 bytes, 12 per image, and one label each.
struct ByteImages {
  std::vector<uint8_t> pixels, labels;
};

/// Writes `images` as `prefix`-images-idx3-ubyte and
/// `prefix`-labels-idx1-ubyte in `dir`.
void writeIdx(const std::string &dir, const std::string &prefix,
              const ByteImages &images);

/// A session over `bundle` with Adam and seed 3; null (and a test failure)
/// when it cannot be created.
gpipe_session_t *adamSessionOf(const Bundle &bundle);

} // namespace gpipe::runtime::testing::capi

#endif // GPIPE_RUNTIME_TESTS_CAPILOOPSUPPORT_H
