#pragma once
// Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator. The i-th number of stream `seed` is a pure function of (seed, i), so
// any thread on any device can draw it without shared state: rand() gives the same values on
// every run, on the CPU and on the GPU.
#include <cmath>
#include <cstdint>

#include "tensor/host_device.h"

namespace linea::philox {

using std::cos, std::log, std::sqrt;

struct Block {
  uint32_t x[4];
};

LINEA_HD uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(product >> 32);
  return static_cast<uint32_t>(product);
}

// Ten rounds of the Philox bijection of counter under key.
LINEA_HD Block generate(uint64_t seed, uint64_t counter) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    const uint32_t lo0 = mulhilo(0xD2511F53u, c0, &hi0);
    const uint32_t lo1 = mulhilo(0xCD9E8D57u, c2, &hi1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Block{{c0, c1, c2, c3}};
}

// Uniform in (0, 1]: never 0, so log(u) in Box-Muller is finite. 53 random bits.
LINEA_HD double uniform_open(uint32_t lo, uint32_t hi) {
  const uint64_t bits = (static_cast<uint64_t>(hi) << 21) ^ (lo >> 11);
  return (static_cast<double>(bits & ((1ull << 53) - 1)) + 1.0) * (1.0 / 9007199254740992.0);
}

// The uniform number at counter i of stream seed, in (0, 1].
LINEA_HD double uniform(uint64_t seed, uint64_t i) {
  const Block b = generate(seed, i);
  return uniform_open(b.x[0], b.x[1]);
}

// The standard normal number at counter i of stream seed (Box-Muller, one value per counter).
LINEA_HD double normal(uint64_t seed, uint64_t i) {
  const Block b = generate(seed, i);
  const double u1 = uniform_open(b.x[0], b.x[1]);
  const double u2 = uniform_open(b.x[2], b.x[3]);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}

}  // namespace linea::philox
