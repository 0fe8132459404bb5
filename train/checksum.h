#pragma once
// FNV-1a, 64 bits: the checksum of the data files linea writes (tokenizers, token caches) and the
// fingerprint of a vocabulary. It is not cryptographic; it catches truncation, flipped bytes and
// stale files, which is all a cache needs, in a dozen lines anyone can check.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace linea::train {

inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;

// Chain calls by passing the previous result as `hash` to checksum data that arrives in pieces.
inline uint64_t fnv1a64(const void* data, size_t size, uint64_t hash = kFnvOffset) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

inline uint64_t fnv1a64(std::string_view text, uint64_t hash = kFnvOffset) {
  return fnv1a64(text.data(), text.size(), hash);
}

}  // namespace linea::train
