//===- FuzzRunReport.cpp - libFuzzer target: gpipe-report's file readers --===//
//
// The input is split in two at its first byte's fraction: a metrics file
// and a Chrome trace, as gpipe-report --html reads them. Each must be read
// or refused with an error naming it, and whatever was read must render.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"
#include "gpipe/runtime/report/HtmlReport.h"

#include <cstdint>
#include <cstdio>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace gpipe::runtime;
  if (size < 1)
    return 0;
  size_t split = 1 + (size - 1) * data[0] / 255;
  std::string metrics =
      gpipe::fuzz::writeTempFile("report-metrics", data + 1, split - 1);
  std::string trace =
      gpipe::fuzz::writeTempFile("report-trace", data + split, size - split);
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
