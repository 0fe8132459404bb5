#pragma once
// A line chart: series of points on a pair of axes, with grid, tick labels, axis titles, a title
// and a legend, rendered into a Raster. It knows nothing of training runs; plot_command.cpp
// turns runs into series.
#include <string>
#include <vector>

#include "tools/plot/raster.h"

namespace linea::plot {

struct Series {
  std::vector<Point> points;  // data coordinates; points a log axis cannot show break the line
  Color color{};
  double line_width = 0;     // pixels; 0: no line
  double marker_radius = 0;  // pixels; 0: no markers
  double alpha = 1;
};

// One row of the legend: a swatch drawn like the series (line and/or marker) and a label. A row
// with an empty label is a gap between groups of rows.
struct LegendEntry {
  std::string label;
  Color color{};
  double line_width = 0;
  double marker_radius = 0;
};

struct ChartSpec {
  int width = 1000, height = 600;
  std::string title, x_title, y_title;
  bool log_y = false;
  std::vector<Series> series;  // drawn in order, later ones on top
  std::vector<LegendEntry> legend;  // top right, inside the plot area
};

// The integer scale of the chart's text for an image of this size (2 for 1000x600): line widths
// and marker sizes are best chosen in proportion to it.
int chart_scale(int width, int height);

// Draws the chart. Axis ranges cover every drawable point with a little padding. An error when
// no point can be drawn.
Raster render_chart(const ChartSpec& spec);

}  // namespace linea::plot
