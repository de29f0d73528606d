//===- SvgCharts.cpp - Line, Gantt and bar charts as inline SVG -----------===//

#include "report/SvgCharts.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>

using namespace gpipe::runtime;
using namespace gpipe::runtime::svg;

std::string svg::escape(const std::string &text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

/// A coordinate with one decimal: enough for a screen, short in the file.
static std::string px(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f", value);
  return buffer;
}

std::string svg::tickLabel(double value) {
  char buffer[32];
  double magnitude = std::fabs(value);
  if (magnitude >= 1e6)
    std::snprintf(buffer, sizeof(buffer), "%gM", value / 1e6);
  else if (magnitude >= 1e4)
    std::snprintf(buffer, sizeof(buffer), "%gk", value / 1e3);
  else
    std::snprintf(buffer, sizeof(buffer), "%g", value);
  return buffer;
}

std::vector<double> svg::niceTicks(double low, double high, int count) {
  std::vector<double> ticks;
  if (!(high > low) || !std::isfinite(low) || !std::isfinite(high))
    return {low};
  double rough = (high - low) / std::max(count, 1);
  double power = std::pow(10.0, std::floor(std::log10(rough)));
  double step = power;
  for (double factor : {1.0, 2.0, 5.0, 10.0})
    if (factor * power >= rough) {
      step = factor * power;
      break;
    }
  // Ticks counted by an integer: far from zero a step, or even 1, can be
  // below the values' precision, and adding it would never advance.
  const double first = std::ceil(low / step - 1e-9),
               last = std::floor(high / step + 1e-9);
  if (!(last - first < 4.0 * count + 4))
    return {low, high};
  const int64_t steps = last >= first ? int64_t(last - first) : -1;
  for (int64_t j = 0; j <= steps; ++j) {
    const double index = first + double(j);
    ticks.push_back(index == 0 ? 0.0 : index * step);
  }
  return ticks;
}

namespace {
/// Margins of a chart's plot area inside its width and height.
constexpr double kLeft = 72, kRight = 16, kTop = 30, kBottom = 44;

/// Maps a data range onto a pixel range.
struct Scale {
  double low, high, from, to;
  double operator()(double value) const {
    return from + (value - low) / (high - low) * (to - from);
  }
};

/// [low, high] widened where it is empty, so that the scale can divide.
void widen(double &low, double &high) {
  if (high > low)
    return;
  double pad = low == 0 ? 1.0 : std::fabs(low) * 0.1;
  low -= pad;
  high += pad;
}

std::string openSvg(int width, int height, const std::string &title) {
  return "<svg class=\"chart\" width=\"" + std::to_string(width) +
         "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " +
         std::to_string(width) + " " + std::to_string(height) +
         "\" role=\"img\" aria-label=\"" + escape(title) +
         "\"><text class=\"chart-title\" x=\"" + px(kLeft) + "\" y=\"18\">" +
         escape(title) + "</text>";
}

/// Horizontal grid lines with their labels on the left.
std::string yAxis(const Scale &y, double left, double right) {
  std::string out;
  for (double tick : niceTicks(y.low, y.high, 5)) {
    out += "<line class=\"grid\" x1=\"" + px(left) + "\" x2=\"" + px(right) +
           "\" y1=\"" + px(y(tick)) + "\" y2=\"" + px(y(tick)) + "\"/>";
    out += "<text class=\"tick\" text-anchor=\"end\" x=\"" + px(left - 6) +
           "\" y=\"" + px(y(tick) + 4) + "\">" + escape(tickLabel(tick)) +
           "</text>";
  }
  return out;
}

/// Tick marks and labels along the bottom, and the axis' name under them.
std::string xAxis(const Scale &x, double bottom, const std::string &label) {
  std::string out = "<line class=\"axis\" x1=\"" + px(x.from) + "\" x2=\"" +
                    px(x.to) + "\" y1=\"" + px(bottom) + "\" y2=\"" +
                    px(bottom) + "\"/>";
  for (double tick : niceTicks(x.low, x.high, 8)) {
    out += "<line class=\"axis\" x1=\"" + px(x(tick)) + "\" x2=\"" +
           px(x(tick)) + "\" y1=\"" + px(bottom) + "\" y2=\"" + px(bottom + 4) +
           "\"/>";
    out += "<text class=\"tick\" text-anchor=\"middle\" x=\"" + px(x(tick)) +
           "\" y=\"" + px(bottom + 17) + "\">" + escape(tickLabel(tick)) +
           "</text>";
  }
  out += "<text class=\"axis-label\" text-anchor=\"middle\" x=\"" +
         px((x.from + x.to) / 2) + "\" y=\"" + px(bottom + 36) + "\">" +
         escape(label) + "</text>";
  return out;
}
} // namespace

std::string svg::renderLineChart(const LineChart &chart) {
  const double left = kLeft, right = chart.width - kRight, top = kTop,
               bottom = chart.height - kBottom;
  double xLow = std::numeric_limits<double>::infinity(), xHigh = -xLow;
  double yLow = xLow, yHigh = -xLow;
  for (const ChartSeries &series : chart.series)
    for (const ChartPoint &p : series.points)
      if (std::isfinite(p.x) && std::isfinite(p.y)) {
        xLow = std::min(xLow, p.x);
        xHigh = std::max(xHigh, p.x);
        yLow = std::min(yLow, p.y);
        yHigh = std::max(yHigh, p.y);
      }
  std::string out = openSvg(chart.width, chart.height, chart.title);
  if (!std::isfinite(xLow)) {
    out += "<text class=\"empty\" x=\"" + px((left + right) / 2) + "\" y=\"" +
           px((top + bottom) / 2) +
           "\" text-anchor=\"middle\">no finite values</text></svg>";
    return out;
  }
  if (std::isfinite(chart.xLow) && std::isfinite(chart.xHigh)) {
    xLow = chart.xLow;
    xHigh = chart.xHigh;
  }
  widen(xLow, xHigh);
  widen(yLow, yHigh);
  // 5% headroom above and below, so that no line runs along an edge.
  double pad = (yHigh - yLow) * 0.05;
  Scale x{xLow, xHigh, left, right}, y{yLow - pad, yHigh + pad, bottom, top};
  out += yAxis(y, left, right);
  out += xAxis(x, bottom, chart.xLabel);
  out += "<text class=\"axis-label\" text-anchor=\"middle\" transform=\"" +
         std::string("translate(16 ") + px((top + bottom) / 2) +
         ") rotate(-90)\">" + escape(chart.yLabel) + "</text>";
  for (const ChartSeries &series : chart.series) {
    std::string points;
    for (const ChartPoint &p : series.points)
      if (std::isfinite(p.x) && std::isfinite(p.y))
        points += (points.empty() ? "" : " ") + px(x(p.x)) + "," + px(y(p.y));
    out += "<g class=\"series " + escape(series.cssClass) + "\"><title>" +
           escape(series.label) + "</title>";
    if (!points.empty())
      out += "<polyline class=\"line\" points=\"" + points + "\"/>";
    if (series.dots)
      for (const ChartPoint &p : series.points)
        if (std::isfinite(p.x) && std::isfinite(p.y))
          out += "<circle class=\"dot\" cx=\"" + px(x(p.x)) + "\" cy=\"" +
                 px(y(p.y)) + "\" r=\"3\"><title>" + escape(series.label) +
                 " at " + tickLabel(p.x) + ": " + tickLabel(p.y) +
                 "</title></circle>";
    out += "</g>";
  }
  return out + "</svg>";
}

std::string svg::renderGanttChart(const GanttChart &chart) {
  const double left = kLeft, right = chart.width - kRight, top = kTop;
  const double bottom = top + chart.rowHeight * double(chart.rows.size());
  const int height = int(bottom + kBottom);
  std::string out = openSvg(chart.width, height, chart.title);
  double span = chart.span > 0 ? chart.span : 1.0;
  Scale x{0, span, left, right};
  for (size_t row = 0; row < chart.rows.size(); ++row) {
    double y = top + chart.rowHeight * double(row);
    out += "<rect class=\"lane\" x=\"" + px(left) + "\" y=\"" + px(y) +
           "\" width=\"" + px(right - left) + "\" height=\"" +
           px(chart.rowHeight) + "\"/>";
    out += "<text class=\"tick\" text-anchor=\"end\" x=\"" + px(left - 6) +
           "\" y=\"" + px(y + chart.rowHeight / 2.0 + 4) + "\">" +
           escape(chart.rows[row]) + "</text>";
  }
  out += xAxis(x, bottom, chart.timeLabel);
  for (const GanttBar &bar : chart.bars) {
    if (bar.row >= chart.rows.size())
      continue;
    double y = top + chart.rowHeight * double(bar.row) + 3;
    double x0 = x(bar.start), width = x(bar.start + bar.duration) - x0;
    out += "<rect class=\"bar " + escape(bar.cssClass) + "\" x=\"" + px(x0) +
           "\" y=\"" + px(y) + "\" width=\"" + px(std::max(width, 0.0)) +
           "\" height=\"" + px(chart.rowHeight - 6) + "\"><title>" +
           escape(bar.tooltip) + "</title></rect>";
    // About 7 px per character at the label's size.
    if (!bar.label.empty() && width >= 7.0 * double(bar.label.size()) + 4)
      out += "<text class=\"bar-label\" text-anchor=\"middle\" x=\"" +
             px(x0 + width / 2) + "\" y=\"" +
             px(y + (chart.rowHeight - 6) / 2.0 + 4) + "\">" +
             escape(bar.label) + "</text>";
  }
  return out + "</svg>";
}

std::string svg::renderBarChart(const BarChart &chart) {
  const double left = kLeft, right = chart.width - kRight, top = kTop,
               bottom = chart.height - kBottom;
  double high = 0;
  size_t barCount = 0;
  for (const BarGroup &group : chart.groups)
    for (const StackedBar &bar : group.bars) {
      double total = 0;
      for (const BarSegment &segment : bar.segments)
        total += segment.value;
      high = std::max(high, total);
      ++barCount;
    }
  std::string out = openSvg(chart.width, chart.height, chart.title);
  if (chart.groups.empty() || barCount == 0)
    return out + "</svg>";
  Scale y{0, high > 0 ? high * 1.08 : 1.0, bottom, top};
  out += yAxis(y, left, right);
  out += "<line class=\"axis\" x1=\"" + px(left) + "\" x2=\"" + px(right) +
         "\" y1=\"" + px(bottom) + "\" y2=\"" + px(bottom) + "\"/>";
  const double groupWidth = (right - left) / double(chart.groups.size());
  for (size_t g = 0; g < chart.groups.size(); ++g) {
    const BarGroup &group = chart.groups[g];
    double groupLeft = left + groupWidth * double(g);
    double barWidth =
        std::min(60.0, groupWidth * 0.8 /
                           double(std::max<size_t>(group.bars.size(), 1)));
    double barsLeft =
        groupLeft + (groupWidth - barWidth * double(group.bars.size())) / 2;
    for (size_t b = 0; b < group.bars.size(); ++b) {
      const StackedBar &bar = group.bars[b];
      double x0 = barsLeft + barWidth * double(b), base = 0;
      for (const BarSegment &segment : bar.segments) {
        double y0 = y(base + segment.value), y1 = y(base);
        out += "<rect class=\"bar " + escape(segment.cssClass) + "\" x=\"" +
               px(x0 + 2) + "\" y=\"" + px(y0) + "\" width=\"" +
               px(barWidth - 4) + "\" height=\"" + px(y1 - y0) + "\"><title>" +
               escape(segment.tooltip) + "</title></rect>";
        base += segment.value;
      }
      out += "<text class=\"tick\" text-anchor=\"middle\" x=\"" +
             px(x0 + barWidth / 2) + "\" y=\"" + px(bottom + 14) + "\">" +
             escape(bar.label) + "</text>";
    }
    out += "<text class=\"axis-label\" text-anchor=\"middle\" x=\"" +
           px(groupLeft + groupWidth / 2) + "\" y=\"" + px(bottom + 32) +
           "\">" + escape(group.label) + "</text>";
  }
  out += "<text class=\"axis-label\" text-anchor=\"middle\" transform=\"" +
         std::string("translate(16 ") + px((top + bottom) / 2) +
         ") rotate(-90)\">" + escape(chart.yLabel) + "</text>";
  return out + "</svg>";
}

std::string svg::renderLegend(
    const std::vector<std::pair<std::string, std::string>> &entries) {
  std::string out = "<div class=\"legend\">";
  for (const auto &[cssClass, label] : entries)
    out += "<span><svg width=\"14\" height=\"14\"><rect class=\"bar " +
           escape(cssClass) + "\" width=\"14\" height=\"14\"/></svg> " +
           escape(label) + "</span>";
  return out + "</div>";
}
