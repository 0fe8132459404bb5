#include "tools/plot/chart.h"

#include <algorithm>
#include <cmath>

#include "tensor/error.h"
#include "tools/plot/axis.h"
#include "tools/plot/font.h"

namespace linea::plot {

namespace {

constexpr Color kWhite{255, 255, 255}, kText{34, 34, 34}, kFrame{90, 90, 90}, kGrid{228, 228, 228},
    kLegendBorder{200, 200, 200};

bool drawable(Point p, bool log_y) { return std::isfinite(p.x) && std::isfinite(p.y) && (!log_y || p.y > 0); }

// Spacing and sizes, all in proportion to the text scale.
struct Metrics {
  int scale, unit, text_h, cap_h;
  explicit Metrics(int s) : scale(s), unit(4 * s), text_h(text_height(s)), cap_h(7 * s) {}
};

// Maps data coordinates to pixel coordinates of the plot rectangle (y grows downwards).
struct Frame {
  Rect plot;
  Axis x, y;
  double px(double v) const { return plot.x0 + x.fraction(v) * (plot.x1 - plot.x0); }
  double py(double v) const { return plot.y1 - y.fraction(v) * (plot.y1 - plot.y0); }
};

// x ticks as dense as their labels allow: adjacent labels keep a gap of two units.
Ticks fitting_x_ticks(const Axis& axis, const Rect& plot, const Metrics& m) {
  const int width = plot.x1 - plot.x0;
  for (int max_ticks = std::max(2, width / (10 * m.unit));; --max_ticks) {
    Ticks ticks = axis_ticks(axis, max_ticks);
    int widest = 0;
    for (const std::string& label : tick_labels(ticks)) widest = std::max(widest, text_width(label, m.scale));
    bool fits = true;
    for (size_t i = 1; i < ticks.values.size(); ++i) {
      const double gap = width * (axis.fraction(ticks.values[i]) - axis.fraction(ticks.values[i - 1]));
      fits = fits && gap >= widest + 2 * m.unit;
    }
    if (fits || max_ticks <= 2) return ticks;
  }
}

// label cut to at most max_width pixels, ending in ".." when cut.
std::string fit_label(const std::string& label, int max_width, int scale) {
  if (text_width(label, scale) <= max_width) return label;
  std::string cut = label;
  while (!cut.empty() && text_width(cut + "..", scale) > max_width) cut.pop_back();
  return cut + "..";
}

void draw_series(Raster& raster, const Frame& frame, const Series& s, bool log_y) {
  // A point a log axis cannot show (or a NaN) ends one drawn piece of the line.
  std::vector<Point> piece;
  auto flush = [&] {
    if (s.line_width > 0 && piece.size() > 1) raster.polyline(piece, s.line_width, s.color, s.alpha);
    piece.clear();
  };
  for (const Point& p : s.points) {
    if (drawable(p, log_y)) piece.push_back({frame.px(p.x), frame.py(p.y)});
    else flush();
  }
  flush();
  if (s.marker_radius <= 0) return;
  for (const Point& p : s.points) {
    if (!drawable(p, log_y)) continue;
    // A white ring sets each marker apart from the lines it sits on.
    const Point c{frame.px(p.x), frame.py(p.y)};
    raster.disc(c, s.marker_radius + 1.5, kWhite, s.alpha);
    raster.disc(c, s.marker_radius, s.color, s.alpha);
  }
}

void draw_axes(Raster& raster, const Frame& frame, const Ticks& x_ticks, const Ticks& y_ticks, const Metrics& m) {
  const Rect& p = frame.plot;
  const std::vector<std::string> x_labels = tick_labels(x_ticks), y_labels = tick_labels(y_ticks);
  for (size_t i = 0; i < x_ticks.values.size(); ++i) {
    const int x = static_cast<int>(std::floor(frame.px(x_ticks.values[i])));
    raster.fill_rect({x, p.y0, x + 1, p.y1}, kGrid);
    raster.fill_rect({x, p.y1, x + 1, p.y1 + m.unit}, kFrame);
    draw_text(raster, x - text_width(x_labels[i], m.scale) / 2, p.y1 + m.unit + m.unit / 2, x_labels[i], m.scale, kText);
  }
  for (size_t i = 0; i < y_ticks.values.size(); ++i) {
    const int y = static_cast<int>(std::floor(frame.py(y_ticks.values[i])));
    raster.fill_rect({p.x0, y, p.x1, y + 1}, kGrid);
    raster.fill_rect({p.x0 - m.unit, y, p.x0, y + 1}, kFrame);
    draw_text(raster, p.x0 - m.unit - m.unit / 2 - text_width(y_labels[i], m.scale), y - m.cap_h / 2, y_labels[i],
              m.scale, kText);
  }
}

void draw_frame(Raster& raster, const Rect& p) {
  raster.fill_rect({p.x0 - 1, p.y0 - 1, p.x1 + 1, p.y0}, kFrame);
  raster.fill_rect({p.x0 - 1, p.y1, p.x1 + 1, p.y1 + 1}, kFrame);
  raster.fill_rect({p.x0 - 1, p.y0, p.x0, p.y1}, kFrame);
  raster.fill_rect({p.x1, p.y0, p.x1 + 1, p.y1}, kFrame);
}

void draw_legend(Raster& raster, const Rect& plot, const std::vector<LegendEntry>& entries, const Metrics& m) {
  if (entries.empty()) return;
  const int swatch = 6 * m.unit, row_h = m.text_h + m.unit, gap_h = m.unit;
  const int max_label = (plot.x1 - plot.x0) / 2 - swatch;
  std::vector<std::string> labels;
  int label_w = 0, height = m.unit;  // the padding above; the last row's spacing pads below
  for (const LegendEntry& e : entries) {
    labels.push_back(fit_label(e.label, max_label, m.scale));
    label_w = std::max(label_w, text_width(labels.back(), m.scale));
    height += e.label.empty() ? gap_h : row_h;
  }
  const int width = m.unit + swatch + m.unit + label_w + m.unit;
  const Rect box{plot.x1 - m.unit - width, plot.y0 + m.unit, plot.x1 - m.unit, plot.y0 + m.unit + height};
  raster.fill_rect(box, kWhite, 0.9);
  raster.fill_rect({box.x0, box.y0, box.x1, box.y0 + 1}, kLegendBorder);
  raster.fill_rect({box.x0, box.y1 - 1, box.x1, box.y1}, kLegendBorder);
  raster.fill_rect({box.x0, box.y0, box.x0 + 1, box.y1}, kLegendBorder);
  raster.fill_rect({box.x1 - 1, box.y0, box.x1, box.y1}, kLegendBorder);
  int y = box.y0 + m.unit;
  for (size_t i = 0; i < entries.size(); ++i) {
    const LegendEntry& e = entries[i];
    if (e.label.empty()) {
      y += gap_h;
      continue;
    }
    const double mid = y + m.cap_h / 2.0;
    const Point a{box.x0 + m.unit + 0.0, mid}, b{box.x0 + m.unit + swatch + 0.0, mid};
    if (e.line_width > 0) raster.line(a, b, e.line_width, e.color);
    if (e.marker_radius > 0) {
      const Point c{(a.x + b.x) / 2, mid};
      raster.disc(c, e.marker_radius + 1.5, kWhite);
      raster.disc(c, e.marker_radius, e.color);
    }
    draw_text(raster, box.x0 + 2 * m.unit + swatch, y, labels[i], m.scale, kText);
    y += row_h;
  }
}

}  // namespace

int chart_scale(int width, int height) {
  return std::clamp(static_cast<int>(std::lround(std::min(width, height) / 300.0)), 1, 4);
}

Raster render_chart(const ChartSpec& spec) {
  double x_min = INFINITY, x_max = -INFINITY, y_min = INFINITY, y_max = -INFINITY;
  for (const Series& s : spec.series)
    for (const Point& p : s.points)
      if (drawable(p, spec.log_y)) {
        x_min = std::min(x_min, p.x), x_max = std::max(x_max, p.x);
        y_min = std::min(y_min, p.y), y_max = std::max(y_max, p.y);
      }
  LINEA_CHECK(x_min <= x_max, "plot", "nothing to draw: no finite", spec.log_y ? ", positive" : "", " values");

  const Metrics m(chart_scale(spec.width, spec.height));
  Raster raster(spec.width, spec.height, kWhite);
  Frame frame;
  frame.x = padded_axis(x_min, x_max, false, 0.02);
  frame.y = padded_axis(y_min, y_max, spec.log_y, 0.05);

  // Vertical layout: title, plot, tick labels, x title. Horizontal: y title, tick labels, plot.
  const Metrics title_m(m.scale + 1);
  Rect& p = frame.plot;
  p.y0 = 2 * m.unit + (spec.title.empty() ? 0 : title_m.text_h + 2 * m.unit);
  p.y1 = spec.height - (2 * m.unit + m.text_h + m.unit + m.text_h + m.unit + m.unit / 2);
  LINEA_CHECK(p.y1 - p.y0 >= 4 * m.text_h, "plot", "image height ", spec.height, " leaves no room for the plot");
  const Ticks y_ticks = axis_ticks(frame.y, std::max(2, (p.y1 - p.y0) / (3 * m.text_h)));
  int y_label_w = 0;
  for (const std::string& label : tick_labels(y_ticks)) y_label_w = std::max(y_label_w, text_width(label, m.scale));
  p.x0 = 2 * m.unit + m.text_h + 2 * m.unit + y_label_w + m.unit + m.unit / 2;
  p.x1 = spec.width - 3 * m.unit;
  LINEA_CHECK(p.x1 - p.x0 >= 10 * m.text_h, "plot", "image width ", spec.width, " leaves no room for the plot");
  const Ticks x_ticks = fitting_x_ticks(frame.x, p, m);

  draw_axes(raster, frame, x_ticks, y_ticks, m);
  raster.set_clip(p);
  for (const Series& s : spec.series) draw_series(raster, frame, s, spec.log_y);
  raster.reset_clip();
  draw_frame(raster, p);
  draw_legend(raster, p, spec.legend, m);

  const int center = (p.x0 + p.x1) / 2;
  // A title too long for its larger text drops to the labels' size before it is cut.
  const int title_room = spec.width - 4 * m.unit;
  const int title_scale = text_width(spec.title, title_m.scale) <= title_room ? title_m.scale : m.scale;
  const std::string title = fit_label(spec.title, title_room, title_scale);
  draw_text(raster, std::max(2 * m.unit, center - text_width(title, title_scale) / 2), 2 * m.unit, title, title_scale,
            kText);
  draw_text(raster, center - text_width(spec.x_title, m.scale) / 2, spec.height - 2 * m.unit - m.text_h, spec.x_title,
            m.scale, kText);
  draw_text_up(raster, 2 * m.unit, (p.y0 + p.y1) / 2 + text_width(spec.y_title, m.scale) / 2, spec.y_title, m.scale,
               kText);
  return raster;
}

}  // namespace linea::plot
