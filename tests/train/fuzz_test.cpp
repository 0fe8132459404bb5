// Hostile bytes: the safetensors reader and the checkpoint loader must answer random, truncated
// and mutated input with a linea::Error (or a successful load), never a crash, a hang, another
// exception or undefined behaviour (the suite also runs under ASan and UBSan). Seeds are fixed, so
// a failure reproduces.
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "tests/train/temp_dir.h"
#include "tests/test_util.h"
#include "train/checkpoint.h"
#include "train/checksum.h"
#include "train/file_io.h"
#include "train/safetensors.h"

namespace linea::train {
namespace {

namespace fs = std::filesystem;

template <class Fn>
void expect_error_or_success(Fn&& fn, const std::string& what) {
  try {
    fn();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": threw a non-linea exception: " << e.what();
  }
}

std::string valid_safetensors() {
  return encode_safetensors({{"a", randn({3, 2})}, {"b", arange(5)}, {"c", tensor({1, 0}, {2}, kBool)},
                             {"d", scalar_tensor(1.0, kFloat64)}, {"e", zeros({0, 3})}},
                            {{"format", "linea"}});
}

std::string random_bytes(std::mt19937_64& rng, size_t n) {
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

// Small random edits: flips, overwrites with characters that matter to JSON, insertions, deletions.
std::string mutate(std::string bytes, std::mt19937_64& rng) {
  static const std::string interesting = "{}[]\":,-0123456789e. \\\x00\xff";
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < edits && !bytes.empty(); ++i) {
    const size_t at = rng() % bytes.size();
    switch (rng() % 4) {
      case 0: bytes[at] = static_cast<char>(bytes[at] ^ (1 << (rng() % 8))); break;
      case 1: bytes[at] = interesting[rng() % interesting.size()]; break;
      case 2: bytes.insert(at, 1, interesting[rng() % interesting.size()]); break;
      case 3: bytes.erase(at, 1 + rng() % 8); break;
    }
  }
  return bytes;
}

// A length prefix that fits, then a header assembled from the pieces a header is made of.
std::string random_header_file(std::mt19937_64& rng) {
  static const char* pieces[] = {"{", "}", "[", "]", ",", ":", "\"dtype\"", "\"F32\"", "\"F64\"", "\"I64\"", "\"BOOL\"",
                                 "\"U8\"", "\"shape\"", "\"data_offsets\"", "\"__metadata__\"", "\"t\"", "\"u\"", "0",
                                 "4", "8", "16", "-1", "1e400", "9223372036854775807", "18446744073709551616",
                                 "4294967296", "null", "true", "\"\\u0000\"", "\"\\ud800\"", " "};
  std::string header = "{";
  const int n = static_cast<int>(rng() % 40);
  for (int i = 0; i < n; ++i) header += pieces[rng() % std::size(pieces)];
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  return out + header + random_bytes(rng, rng() % 48);
}

TEST(SafetensorsFuzz, RandomBytes) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 3000; ++i) {
    const std::string bytes = random_bytes(rng, rng() % 64);
    expect_error_or_success([&] { decode_safetensors(bytes); }, "random bytes");
  }
}

TEST(SafetensorsFuzz, RandomHeaders) {
  std::mt19937_64 rng(2);
  for (int i = 0; i < 5000; ++i) {
    const std::string bytes = random_header_file(rng);
    expect_error_or_success([&] { decode_safetensors(bytes); }, "random header");
  }
}

TEST(SafetensorsFuzz, EveryTruncationIsAnError) {
  const std::string bytes = valid_safetensors();
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(decode_safetensors(bytes.substr(0, n)), Error) << "truncated to " << n << " bytes";
  EXPECT_NO_THROW(decode_safetensors(bytes));
}

TEST(SafetensorsFuzz, MutatedValidFiles) {
  std::mt19937_64 rng(3);
  const std::string bytes = valid_safetensors();
  for (int i = 0; i < 5000; ++i) {
    const std::string mutated = mutate(bytes, rng);
    expect_error_or_success([&] { decode_safetensors(mutated); }, "mutated file");
  }
}

// Rewrites a checkpoint's manifest so that it vouches for whatever its files now hold: the
// damage then reaches the parsers instead of stopping at the checksum.
void bless(const std::string& dir) {
  json::Value manifest = json::parse(read_file(dir + "/manifest.json", "manifest"));
  const json::Value files = manifest.at("files");  // a copy: the loop edits the manifest
  for (const auto& [file, entry] : files.items()) {
    const std::string bytes = read_file(dir + "/" + file, "file");
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016" PRIx64, fnv1a64(bytes));
    manifest["files"][file]["bytes"] = static_cast<int64_t>(bytes.size());
    manifest["files"][file]["fnv1a64"] = std::string(hex);
  }
  std::ofstream(dir + "/manifest.json", std::ios::binary | std::ios::trunc) << manifest.dump();
}

void overwrite(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(CheckpointFuzz, DamagedFilesOnlyEverGiveErrors) {
  linea::testing::TempDir root;
  Checkpoint c;
  c.model = {{"w", randn({4, 4})}, {"mask", tensor({1, 0, 1}, {3}, kBool)}};
  c.config = json::parse(R"({"d_model": 4})");
  c.optimizer = {"adamw", {{"exp_avg.w", randn({4, 4})}}, {{"lr", 0.1}, {"step", 3.0}, {"step.w", 3.0}}};
  c.trainer.step = 3;
  c.trainer.data = json::parse(R"({"position": 12})");
  const std::string dir = save_checkpoint(root.path(), c);
  std::mt19937_64 rng(4);
  for (const char* file : {"model.safetensors", "config.json", "optimizer.safetensors", "trainer.json", "manifest.json"}) {
    const std::string path = dir + "/" + file;
    const std::string original = read_file(path, "file");
    for (int i = 0; i < 150; ++i) {
      std::string damaged;
      switch (i % 3) {
        case 0: damaged = mutate(original, rng); break;
        case 1: damaged = original.substr(0, rng() % original.size()); break;
        case 2: damaged = random_bytes(rng, rng() % 200); break;
      }
      overwrite(path, damaged);
      if (std::string(file) != "manifest.json" && i % 2 == 0) bless(dir);
      expect_error_or_success([&] { load_checkpoint(dir); }, std::string(file) + " damaged");
    }
    overwrite(path, original);
    bless(dir);
    ASSERT_NO_THROW(load_checkpoint(dir));
  }
}

}  // namespace
}  // namespace linea::train
