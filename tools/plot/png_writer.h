#pragma once
// PNG output through libpng (found by CMake when present; LINEA_WITH_PNG is then defined). Built
// without it, these throw "built without libpng; install libpng-dev and rebuild", so `linea plot`
// exists either way and says what is missing.
#include <string>

#include "tools/plot/raster.h"

namespace linea::plot {

// True when this build can write PNG files.
bool png_supported();

// The bytes of an 8-bit RGB PNG of the raster.
std::string encode_png(const Raster& raster);

// Writes the PNG to path atomically (a crash leaves the old file or the new one, never half).
void write_png(const std::string& path, const Raster& raster);

}  // namespace linea::plot
