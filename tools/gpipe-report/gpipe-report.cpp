//===- gpipe-report.cpp - Draw a training run as one HTML page ------------===//
//
//   gpipe-report --html run.html --metrics run.jsonl --trace trace.json \
//       --bundle model.bundle.json
//
// The page gpipe-run --report writes at the end of a run, drawn afterwards
// from the files a run left (HtmlReport.h): the curves from its --metrics
// file, the last step's timeline from its --trace, the memory plan from its
// --bundle and the measured peaks from the metrics. Any of the three may be
// missing; the page says what it lacks. (The compiler's plan, without a run,
// is gpipe-opt's --gpipe-report pass.) Exit status: 0; 2 for a bad option; 3
// for a file that cannot be read or written or is not what it should be.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Support/Version.h"
#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/report/HtmlReport.h"
#include "gpipe/runtime/report/TrainingReport.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;
namespace rt = gpipe::runtime;

static cl::OptionCategory reportOptions("Report");

static cl::opt<std::string>
    htmlPath("html", cl::Required,
             cl::desc("write the page here (one self-contained HTML file)"),
             cl::value_desc("file"), cl::cat(reportOptions));
static cl::opt<std::string> metricsPath(
    "metrics", cl::init(""),
    cl::desc("the run's metrics file (gpipe-run --metrics): the curves and "
             "the measured memory"),
    cl::value_desc("file"), cl::cat(reportOptions));
static cl::opt<std::string>
    tracePath("trace", cl::init(""),
              cl::desc("the last step's Chrome trace (gpipe-run --trace): the "
                       "timeline per device"),
              cl::value_desc("file"), cl::cat(reportOptions));
static cl::opt<std::string> bundlePath(
    "bundle", cl::init(""),
    cl::desc("the run's program bundle (gpipe-run --bundle, gpipe-translate "
             "--gpipe-to-bundle): the pipeline and the memory plan"),
    cl::value_desc("file"), cl::cat(reportOptions));
static cl::opt<std::string> title("title", cl::init(""),
                                  cl::desc("the page's heading"),
                                  cl::cat(reportOptions));

constexpr int kExitUsage = 2, kExitBadInput = 3;

static int fail(const std::string &message, int exit) {
  llvm::errs() << "gpipe-report: error: " << message << "\n";
  return exit;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  gpipe::addVersionPrinter("gpipe-report");
  cl::HideUnrelatedOptions(reportOptions);
  if (!cl::ParseCommandLineOptions(
          argc, argv,
          "gpipe-report: draw a training run as one HTML page from the files "
          "gpipe-run wrote\n",
          &llvm::errs()))
    return kExitUsage;
  if (metricsPath.empty() && tracePath.empty() && bundlePath.empty())
    return fail("nothing to draw: give at least one of --metrics, --trace "
                "and --bundle",
                kExitUsage);

  rt::RunReport report;
  report.title = title.empty() ? "gpipe training run" : std::string(title);
  if (!bundlePath.empty()) {
    rt::StatusOr<rt::Bundle> bundle = rt::loadBundle(bundlePath);
    if (!bundle.ok())
      return fail(bundle.status().message(), kExitBadInput);
    report.pipeline = rt::describePipeline(*bundle);
    report.idealBubble = rt::idealBubbleText(*bundle);
    report.memory = rt::memoryReport(*bundle, {});
  }
  if (!metricsPath.empty())
    if (rt::Status read = rt::readMetricsFile(metricsPath, report); !read.ok())
      return fail(read.message(), kExitBadInput);
  if (!tracePath.empty()) {
    rt::StatusOr<rt::Timeline> timeline = rt::readChromeTrace(tracePath);
    if (!timeline.ok())
      return fail(timeline.status().message(), kExitBadInput);
    report.lastStep = std::move(*timeline);
  }
  if (rt::Status written = rt::writeHtmlReport(htmlPath, report); !written.ok())
    return fail(written.message(), kExitBadInput);
  return 0;
}
