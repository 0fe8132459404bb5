#pragma once
// What every `linea bench` target shares: median wall times and JSON-lines output, and the flags
// that several targets take alike.
#include <concepts>
#include <fstream>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cpu/parallel.h"
#include "nn/config.h"
#include "nn/json.h"
#include "tensor/device.h"
#include "tensor/scoped_setting.h"
#include "tools/flags.h"

namespace linea::cli::bench {

// What the CPU bench targets share: a target's Config derives from it.
struct TimingOptions {
  int repeats = 10;
  int threads = cpu::num_threads();
  std::string out;
};

// Their flags: --repeats, --threads (linea's kernels and OpenBLAS) and --out. parse() is
// Flags::parse (false: --help was printed) that then refuses --repeats or --threads below 1.
void add_timing_flags(Flags& flags, TimingOptions& options);
bool parse(Flags& flags, std::span<const std::string> args, const TimingOptions& options);

// While alive, linea's kernels and OpenBLAS run on `threads` threads; linea's own count is given
// back at the end.
class ThreadsForBench : public ScopedSetting<int, cpu::num_threads, cpu::set_num_threads> {
 public:
  explicit ThreadsForBench(int threads);
};

// The median of some timings (the mean of the middle two for an even count).
double median(std::vector<double> values);

// Median of `repeats` timed calls of fn, in milliseconds, after `warmup` untimed ones (first
// touches of memory, thread start-up and lazy initialisation are not what we measure).
double median_ms(int repeats, const std::function<void()>& fn, int warmup = 1);

// The same where every call needs fresh inputs: setup() runs before each call, untimed.
double median_ms_with_setup(int repeats, const std::function<void()>& setup, const std::function<void()>& fn,
                            int warmup = 1);

// Medians of two contenders timed alternately, call by call and in alternating order, so that
// load from other processes and caches warmed by the other contender fall on both alike and their
// ratio stays fair on a busy machine.
std::pair<double, double> median_ms_pair(int repeats, const std::function<void()>& a, const std::function<void()>& b,
                                         int warmup = 1);

// Peak memory over a stretch of work, in MiB: on CUDA the caching allocator's peak in use (what
// live tensors held), on the CPU the process's peak resident set (Linux's VmHWM, which
// reset_peak_memory lowers to the current resident set through /proc/self/clear_refs, after
// handing malloc's free blocks back to the system: so it includes the weights and whatever else
// the process holds). NaN (null in JSON) where it cannot be read.
void reset_peak_memory(Device device);
double peak_memory_mib(Device device);

// A flag of comma-separated entries, such as --lengths 1024,4096,16384 or --algorithms
// chunked,sequential. It keeps the name it was added under, so that a bad entry fails under the
// flag the user typed.
class ListFlag {
 public:
  explicit ListFlag(std::string text = "") : text_(std::move(text)) {}
  void add_to(Flags& flags, std::string name, const std::string& help);

  const std::string& text() const { return text_; }
  std::vector<std::string> items() const;  // "a,b,c" -> {"a", "b", "c"}
  // "1024,4096,16384" -> {1024, 4096, 16384}; a bad or non-positive entry fails the flag.
  std::vector<int64_t> positive_numbers(const Flags& flags) const;
  // Fails the flag with "--<name> takes <takes>, got '<got>'".
  [[noreturn]] void fail(const Flags& flags, const std::string& takes, const std::string& got) const;

 private:
  std::string name_;
  std::string text_;
};

// "a,b,c" -> {"a", "b", "c"}.
std::vector<std::string> split_list(const std::string& text);

// One JSON object on one line; keys keep the order they were added in.
class JsonLine {
 public:
  JsonLine& add(const std::string& key, const std::string& value) { return set(key, value); }
  JsonLine& add(const std::string& key, const char* value) { return set(key, value); }
  JsonLine& add(const std::string& key, double value);  // 6 significant digits; non-finite values become null
  template <std::integral T>
  JsonLine& add(const std::string& key, T value) {
    return set(key, value);
  }
  JsonLine& add(const std::string& key, const std::vector<int64_t>& values) { return set(key, values); }
  std::string str() const { return json::dump(record_); }

 private:
  JsonLine& set(const std::string& key, json::Value value) {
    record_[key] = std::move(value);
    return *this;
  }
  json::Value record_ = json::Value::object();
};

// Writes each line to stdout and, when path is not empty, to that file as well.
class JsonLinesOut {
 public:
  explicit JsonLinesOut(const std::string& path);
  void write(const JsonLine& line);

 private:
  std::ofstream file_;
};

// The size of the language model `bench train` and `bench decode` build: one layer letter
// repeated, RMSNorm, tied embeddings and a GELU-tanh MLP.
struct LmSize {
  int64_t vocab = 0, d_model = 0, layers = 0, heads = 0;
};

// The help of --vocab, --d-model, --layers and --heads; a target that gives their values a
// meaning of its own (0: a standard size) says so in its help.
struct LmSizeHelp {
  std::string vocab = "vocabulary", d_model = "width", layers = "layers", heads = "heads";
};

// --vocab, --d-model, --layers and --heads, in that order, bound to size.
void add_lm_size_flags(Flags& flags, LmSize& size, const LmSizeHelp& help = {});

// The model of size.layers layers of `letter` (the MLP's width: the default 4 D unless the caller
// sets mlp_hidden).
nn::ModelConfig lm_config(const LmSize& size, char letter);

// The size as the JSON lines report it: "V", "d", "L" and "H".
JsonLine& add_lm_size(JsonLine& line, const LmSize& size);

}  // namespace linea::cli::bench
