#include "tools/plot/raster.h"

#include <algorithm>
#include <cmath>

#include "tensor/error.h"

namespace linea::plot {

namespace {

// The share of a pixel inside a shape whose edge is `inside` pixels away from the pixel's center
// (negative: the center is outside): a linear ramp one pixel wide centered on the edge.
double coverage(double inside) { return std::clamp(inside + 0.5, 0.0, 1.0); }

// Distance from p to the segment a-b.
double segment_distance(Point p, Point a, Point b) {
  const double dx = b.x - a.x, dy = b.y - a.y;
  const double length2 = dx * dx + dy * dy;
  double t = 0;
  if (length2 > 0) t = std::clamp(((p.x - a.x) * dx + (p.y - a.y) * dy) / length2, 0.0, 1.0);
  return std::hypot(p.x - (a.x + t * dx), p.y - (a.y + t * dy));
}

Rect intersect(Rect a, Rect b) {
  return {std::max(a.x0, b.x0), std::max(a.y0, b.y0), std::min(a.x1, b.x1), std::min(a.y1, b.y1)};
}

// The pixels a shape spanning [lo, hi] in both axes can touch, widened by margin.
Rect bounds(double x_lo, double y_lo, double x_hi, double y_hi, double margin) {
  auto lo = [&](double v) { return static_cast<int>(std::max(std::floor(v - margin), -1e9)); };
  auto hi = [&](double v) { return static_cast<int>(std::min(std::ceil(v + margin), 1e9)) + 1; };
  return {lo(x_lo), lo(y_lo), hi(x_hi), hi(y_hi)};
}

}  // namespace

Raster::Raster(int width, int height, Color background) : width_(width), height_(height) {
  LINEA_CHECK(width > 0 && height > 0 && width <= 20000 && height <= 20000, "plot",
              "image size must be between 1x1 and 20000x20000, got ", width, "x", height);
  clip_ = {0, 0, width, height};
  pixels_.resize(static_cast<size_t>(width) * height * 3);
  for (size_t i = 0; i < pixels_.size(); i += 3) {
    pixels_[i] = background.r;
    pixels_[i + 1] = background.g;
    pixels_[i + 2] = background.b;
  }
}

Color Raster::at(int x, int y) const {
  LINEA_CHECK(x >= 0 && y >= 0 && x < width_ && y < height_, "plot", "pixel (", x, ", ", y, ") outside a ", width_,
              "x", height_, " image");
  const size_t i = (static_cast<size_t>(y) * width_ + x) * 3;
  return {pixels_[i], pixels_[i + 1], pixels_[i + 2]};
}

void Raster::set_clip(Rect clip) { clip_ = intersect(clip, {0, 0, width_, height_}); }

void Raster::blend(int x, int y, Color color, double alpha) {
  if (x < clip_.x0 || y < clip_.y0 || x >= clip_.x1 || y >= clip_.y1 || !(alpha > 0)) return;
  alpha = std::min(alpha, 1.0);
  uint8_t* p = &pixels_[(static_cast<size_t>(y) * width_ + x) * 3];
  const uint8_t channels[3] = {color.r, color.g, color.b};
  for (int c = 0; c < 3; ++c) p[c] = static_cast<uint8_t>(std::lround(p[c] + alpha * (channels[c] - p[c])));
}

void Raster::fill_rect(Rect rect, Color color, double alpha) {
  const Rect r = intersect(rect, clip_);
  for (int y = r.y0; y < r.y1; ++y)
    for (int x = r.x0; x < r.x1; ++x) blend(x, y, color, alpha);
}

void Raster::polyline(const std::vector<Point>& points, double width, Color color, double alpha) {
  if (points.empty()) return;
  const double half = std::max(width, 1.0) / 2;
  double x_lo = points[0].x, x_hi = x_lo, y_lo = points[0].y, y_hi = y_lo;
  for (const Point& p : points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) return;  // a caller's bug; never draw garbage
    x_lo = std::min(x_lo, p.x), x_hi = std::max(x_hi, p.x);
    y_lo = std::min(y_lo, p.y), y_hi = std::max(y_hi, p.y);
  }
  const Rect box = intersect(bounds(x_lo, y_lo, x_hi, y_hi, half + 1), clip_);
  if (box.x0 >= box.x1 || box.y0 >= box.y1) return;
  const int box_w = box.x1 - box.x0;
  // Per pixel, the largest coverage of any segment: the union of the segments, not their sum.
  std::vector<float> mask(static_cast<size_t>(box_w) * (box.y1 - box.y0), 0.0f);
  for (size_t i = 0; i < points.size(); ++i) {
    const Point a = points[i], b = points[i + 1 < points.size() ? i + 1 : i];
    const Rect seg = intersect(bounds(std::min(a.x, b.x), std::min(a.y, b.y), std::max(a.x, b.x),
                                      std::max(a.y, b.y), half + 1),
                               box);
    for (int y = seg.y0; y < seg.y1; ++y)
      for (int x = seg.x0; x < seg.x1; ++x) {
        const double c = coverage(half - segment_distance({x + 0.5, y + 0.5}, a, b));
        float& m = mask[static_cast<size_t>(y - box.y0) * box_w + (x - box.x0)];
        m = std::max(m, static_cast<float>(c));
      }
  }
  for (int y = box.y0; y < box.y1; ++y)
    for (int x = box.x0; x < box.x1; ++x) blend(x, y, color, alpha * mask[static_cast<size_t>(y - box.y0) * box_w + (x - box.x0)]);
}

void Raster::disc(Point center, double radius, Color color, double alpha) {
  if (!std::isfinite(center.x) || !std::isfinite(center.y) || !(radius > 0)) return;
  const Rect box = intersect(bounds(center.x, center.y, center.x, center.y, radius + 1), clip_);
  for (int y = box.y0; y < box.y1; ++y)
    for (int x = box.x0; x < box.x1; ++x)
      blend(x, y, color, alpha * coverage(radius - std::hypot(x + 0.5 - center.x, y + 0.5 - center.y)));
}

}  // namespace linea::plot
