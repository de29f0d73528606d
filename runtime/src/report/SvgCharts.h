//===- SvgCharts.h - Line, Gantt and bar charts as inline SVG ---*- C++ -*-===//
//
// The charts of the HTML report (HtmlReport.h), drawn as SVG text so that
// the page needs no script and fetches nothing. Colours come from CSS
// classes that the page defines; every mark carries a <title> tooltip.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_SVGCHARTS_H
#define GPIPE_RUNTIME_SVGCHARTS_H

#include <cmath>
#include <string>
#include <vector>

namespace gpipe::runtime::svg {

/// `text` with &, <, > and quotes escaped, for HTML text and attributes.
std::string escape(const std::string &text);

/// "0", "250", "1.5k", "0.001": a tick label.
std::string tickLabel(double value);

/// Tick values at 1, 2 or 5 times a power of ten, about `count` of them,
/// inside [low, high].
std::vector<double> niceTicks(double low, double high, int count);

struct ChartPoint {
  double x = 0, y = 0;
};

struct ChartSeries {
  std::string label;
  std::string cssClass; ///< the stroke and fill colour
  std::vector<ChartPoint> points;
  bool dots = false; ///< a circle per point besides the line
};

struct LineChart {
  std::string title, xLabel, yLabel;
  std::vector<ChartSeries> series;
  int width = 920, height = 300;
  /// The x axis' range where both are finite (charts of one run share it);
  /// else the points'.
  double xLow = NAN, xHigh = NAN;
};

/// The chart as an <svg> element. Points that are not finite are left out
/// (a diverged loss); a chart with no finite point says so in its plot area.
std::string renderLineChart(const LineChart &chart);

struct GanttBar {
  unsigned row = 0;
  double start = 0, duration = 0; ///< in the chart's time unit
  std::string cssClass;
  std::string label;   ///< drawn inside the bar where it fits ("3")
  std::string tooltip; ///< the bar's <title>
};

struct GanttChart {
  std::string title, timeLabel;
  std::vector<std::string> rows; ///< top to bottom
  std::vector<GanttBar> bars;
  double span = 0; ///< the time axis runs from 0 to here
  int width = 920, rowHeight = 28;
};

/// One <rect class="bar ..."> per bar, at x proportional to its start and
/// width to its duration over the span.
std::string renderGanttChart(const GanttChart &chart);

struct BarSegment {
  double value = 0;
  std::string cssClass, tooltip;
};

/// One stacked bar: its segments bottom to top.
struct StackedBar {
  std::string label;
  std::vector<BarSegment> segments;
};

struct BarGroup {
  std::string label;
  std::vector<StackedBar> bars;
};

struct BarChart {
  std::string title, yLabel;
  std::vector<BarGroup> groups;
  int width = 920, height = 280;
};

/// Groups side by side, each bar's height proportional to its total from a
/// zero baseline.
std::string renderBarChart(const BarChart &chart);

/// A row of coloured swatches with labels: (cssClass, label) pairs.
std::string
renderLegend(const std::vector<std::pair<std::string, std::string>> &entries);

} // namespace gpipe::runtime::svg

#endif // GPIPE_RUNTIME_SVGCHARTS_H
