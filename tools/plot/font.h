#pragma once
// The text of a chart: a built-in 5x7 bitmap font for printable ASCII (32..126), drawn at integer
// scales so every stroke stays crisp. Glyphs sit on a 6-column cell (one column of spacing) and a
// 9-row box: 7 rows down to the baseline and 2 below it for the descenders of g, j, p, q, y and
// the tails of , and ;. Any other byte (UTF-8 in a run name) is drawn as '?'.
#include <string_view>

#include "tools/plot/raster.h"

namespace linea::plot {

// Size in pixels of text drawn at scale (1, 2, 3, ...): the width of its cells, and the height
// of the box from the top of a capital to the bottom of a descender.
int text_width(std::string_view text, int scale);
int text_height(int scale);

// Draws text left to right with the top-left corner of its box at (x, y).
void draw_text(Raster& raster, int x, int y, std::string_view text, int scale, Color color);
// Draws text turned a quarter counterclockwise, reading bottom to top (a y-axis title), with the
// bottom-left corner of its box at (x, y): it spans x .. x + text_height, y - text_width .. y.
void draw_text_up(Raster& raster, int x, int y, std::string_view text, int scale, Color color);

}  // namespace linea::plot
