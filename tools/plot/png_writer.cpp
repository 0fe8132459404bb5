#include "tools/plot/png_writer.h"

#include "tensor/error.h"
#include "train/file_io.h"

#ifdef LINEA_WITH_PNG
#include <png.h>
#endif

namespace linea::plot {

#ifdef LINEA_WITH_PNG

bool png_supported() { return true; }

std::string encode_png(const Raster& raster) {
  // libpng's simplified API: it reports errors through image.message instead of longjmp, which
  // would skip the destructors of the C++ objects around it.
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(raster.width());
  image.height = static_cast<png_uint_32>(raster.height());
  image.format = PNG_FORMAT_RGB;
  const png_int_32 row_stride = raster.width() * 3;
  png_alloc_size_t size = 0;
  // First pass: the size of the encoded image; second pass: the bytes.
  bool ok = png_image_write_to_memory(&image, nullptr, &size, 0, raster.pixels().data(), row_stride, nullptr) != 0;
  std::string bytes(ok ? size : 0, '\0');
  if (ok) ok = png_image_write_to_memory(&image, bytes.data(), &size, 0, raster.pixels().data(), row_stride, nullptr) != 0;
  const std::string message = image.message;
  png_image_free(&image);
  LINEA_CHECK(ok, "plot", "libpng could not encode the image: ", message);
  bytes.resize(size);
  return bytes;
}

#else

bool png_supported() { return false; }

std::string encode_png(const Raster&) { fail("plot", "built without libpng; install libpng-dev and rebuild"); }

#endif

void write_png(const std::string& path, const Raster& raster) { train::write_file_atomically(path, encode_png(raster)); }

}  // namespace linea::plot
