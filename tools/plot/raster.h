#pragma once
// An RGB image in memory with the few drawing operations a chart needs.
//
// Shapes are anti-aliased by coverage: a pixel's share of a shape is taken from the distance of
// its center to the shape's edge, ramped over one pixel. That gives smooth lines of any width and
// round discs without supersampling the whole image. Pixel (x, y) covers [x, x+1) x [y, y+1), so
// its center is (x + 0.5, y + 0.5); y grows downwards.
#include <cstdint>
#include <vector>

namespace linea::plot {

struct Color {
  uint8_t r = 0, g = 0, b = 0;
  friend bool operator==(Color, Color) = default;
};

struct Point {
  double x = 0, y = 0;
};

// The pixels x0 <= x < x1, y0 <= y < y1.
struct Rect {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

class Raster {
 public:
  Raster(int width, int height, Color background);

  int width() const { return width_; }
  int height() const { return height_; }
  Color at(int x, int y) const;
  // Rows top to bottom, 3 bytes (R, G, B) a pixel: what a PNG encoder takes.
  const std::vector<uint8_t>& pixels() const { return pixels_; }

  // Drawing outside the clip rectangle does nothing: a chart clips its curves to the plot area.
  // The clip is the whole image until set, and never extends beyond it.
  void set_clip(Rect clip);
  void reset_clip() { clip_ = {0, 0, width_, height_}; }

  // Mixes color into one pixel with weight alpha in [0, 1].
  void blend(int x, int y, Color color, double alpha);
  void fill_rect(Rect rect, Color color, double alpha = 1);
  // A connected line through the points, width pixels wide (at least 1). Its coverage is built
  // for the whole line before any pixel is touched, so where segments overlap at a joint the
  // pixel is not painted twice: a translucent line keeps an even tone.
  void polyline(const std::vector<Point>& points, double width, Color color, double alpha = 1);
  void line(Point a, Point b, double width, Color color, double alpha = 1) { polyline({a, b}, width, color, alpha); }
  void disc(Point center, double radius, Color color, double alpha = 1);

 private:
  int width_, height_;
  Rect clip_;
  std::vector<uint8_t> pixels_;
};

}  // namespace linea::plot
