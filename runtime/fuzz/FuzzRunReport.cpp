//===- FuzzRunReport.cpp - libFuzzer target: gpipe-report's file readers --===//
//
// The input is split in two at its first byte's fraction: a metrics file
// and a Chrome trace, as gpipe-report --html reads them. Each must be read
// or refused with an error naming it, and whatever was read must render.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/HtmlReport.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace {

std::string writeTemp(const char *suffix, const uint8_t *data, size_t size) {
  std::string path =
      "/tmp/gpipe-fuzz-report-" + std::to_string(::getpid()) + suffix;
  if (std::FILE *file = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, file);
    std::fclose(file);
  }
  return path;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace gpipe::runtime;
  if (size < 1)
    return 0;
  size_t split = 1 + (size - 1) * data[0] / 255;
  std::string metrics = writeTemp("-metrics", data + 1, split - 1);
  std::string trace = writeTemp("-trace", data + split, size - split);
  RunReport report;
  (void)readMetricsFile(metrics, report);
  StatusOr<Timeline> timeline = readChromeTrace(trace);
  if (timeline.ok())
    report.lastStep = std::move(*timeline);
  (void)renderHtmlReport(report);
  std::remove(metrics.c_str());
  std::remove(trace.c_str());
  return 0;
}
