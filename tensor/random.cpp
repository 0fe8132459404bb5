#include "tensor/random.h"

namespace linea {

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::seed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return seed_;
}

uint64_t Generator::offset() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return offset_;
}

void Generator::set_offset(uint64_t offset) {
  std::lock_guard<std::mutex> lock(mutex_);
  offset_ = offset;
}

Generator::Draw Generator::reserve(uint64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Draw draw{seed_, offset_};
  offset_ += n;
  return draw;
}

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace linea
