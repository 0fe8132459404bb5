#pragma once
// Seeded random streams. A Generator is (seed, offset): each draw of n numbers takes counters
// [offset, offset + n) of the Philox stream `seed` and advances offset by n. The same seed gives
// the same numbers on every run, on every thread count and on the CPU and GPU alike.
#include <cstdint>
#include <mutex>

namespace linea {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  void manual_seed(uint64_t seed);
  uint64_t seed() const;
  // Position in the stream; saved in checkpoints so a resumed run draws what it would have.
  uint64_t offset() const;
  void set_offset(uint64_t offset);
  // Reserves n counters: the stream and the first counter of the draw.
  struct Draw {
    uint64_t seed, offset;
  };
  Draw reserve(uint64_t n);

 private:
  mutable std::mutex mutex_;
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
};

// The generator used when none is passed; seeded with 0 at start-up.
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace linea
