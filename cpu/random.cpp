// Random fills from the counter-based Philox stream (tensor/philox.h), in parallel: element i
// depends only on (seed, offset + i), never on the thread that draws it.
#include <cmath>

#include "cpu/cpu_backend.h"
#include "cpu/parallel.h"
#include "tensor/philox.h"

namespace linea::cpu {

namespace {

// Writes convert(draw(i)) into element i; convert receives the value already in type T.
template <class Draw, class Convert>
void fill_random(const Tensor& out, Draw draw, Convert convert) {
  dispatch_floating(out.dtype(), "random", [&]<class T>() {
    T* dst = out.data<T>();
    parallel_for(out.numel(), 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) dst[i] = convert(static_cast<T>(draw(i)));
    });
  });
}

}  // namespace

void CpuBackend::uniform(const Tensor& out, uint64_t seed, uint64_t offset, double low, double high) const {
  // uniform() is in (0, 1]; 1 - u is in [0, 1), the usual half-open interval.
  // Rounding to float can land exactly on `high`; step back inside [low, high).
  fill_random(
      out, [&](int64_t i) { return low + (high - low) * (1.0 - philox::uniform(seed, offset + i)); },
      [&]<class T>(T v) { return v >= static_cast<T>(high) && high > low ? std::nextafter(static_cast<T>(high), static_cast<T>(low)) : v; });
}

void CpuBackend::normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double stddev) const {
  fill_random(
      out, [&](int64_t i) { return mean + stddev * philox::normal(seed, offset + i); }, [](auto v) { return v; });
}

}  // namespace linea::cpu
