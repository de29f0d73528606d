//===- CApiConformanceSupport.cpp - The C API conformance table -----------===//
//
// The helpers of CApiConformanceSupport.h, and the table of every case:
// the subjects' cases one after another.
//
//===----------------------------------------------------------------------===//

#include "CApiConformanceSupport.h"

#include <fstream>
#include <sstream>

namespace gpipe::runtime::testing::conformance {

std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void writeText(const std::string &path, const std::string &text) {
  std::ofstream(path, std::ios::binary) << text;
}

gpipe_session_options_t defaultOptions() {
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  return options;
}

std::vector<Case> cases() {
  using Subject = std::vector<Case> (*)();
  const Subject subjects[] = {creationCases, queryCases,     inputCases,
                              loopCases,     parameterCases, checkpointCases};
  std::vector<Case> all;
  for (Subject subject : subjects) {
    std::vector<Case> c = subject();
    all.insert(all.end(), c.begin(), c.end());
  }
  return all;
}

} // namespace gpipe::runtime::testing::conformance
