// `linea bench train`: tokens/s and peak memory of full training steps (forward, backward, clip,
// AdamW) of the anchor's language model, for softmax attention and ReGLA. The configuration is
// the one ../shared/bench/torch_bench.py (GPU) and torch_cpu_bench.py (CPU) measure PyTorch on:
//   cuda: V=8192, D=512, 6 layers, 8 heads of 64, MLP 4D (GELU tanh), B=16, T=1024
//   cpu:  V=256,  D=128, 4 layers, 4 heads,        MLP 4D (GELU tanh), B=8,  T=256
// with RMSNorm, tied embeddings, AdamW (lr 3e-4, wd 0.01) and clipping at 1.0. Run the PyTorch
// anchor beside it in the same session to get a ratio.
//
// With --gpus N (tools/scale_out.h) the step is data-parallel over N GPUs, B sequences on each:
// tok_s counts all of them, and each rank first times the same step alone, without collectives,
// so that comm_share = 1 - alone / together is the share of the step lost to the all-reduce
// (what overlapping it with backward did not hide).
#include <chrono>
#include <cstdio>

#include "cuda/memory.h"
#include "nn/precision.h"
#include "tools/bench_util.h"
#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/scale_out.h"
#include "tools/train_flags.h"
#include "train/adamw.h"
#include "train/gradient_sync.h"
#include "train/train_step.h"

namespace linea::cli {

namespace {

struct Config {
  std::string device = "cuda";
  std::string models = "softmax,regla";
  // Each 0 until fill_standard() gives it the device's standard.
  bench::LmSize size;
  int64_t batch = 0, seq = 0;
  int repeats = 10;
  int warmup = 3;
  std::string out;
  std::string precision = "fp32";
};

void fill_standard(Config& c, bool cuda) {
  auto pick = [](int64_t& field, int64_t gpu, int64_t cpu, bool on_cuda) {
    if (field == 0) field = on_cuda ? gpu : cpu;
  };
  pick(c.size.vocab, 8192, 256, cuda);
  pick(c.size.d_model, 512, 128, cuda);
  pick(c.size.layers, 6, 4, cuda);
  pick(c.size.heads, 8, 4, cuda);
  pick(c.batch, 16, 8, cuda);
  pick(c.seq, 1024, 256, cuda);
}

void bench_model(const Config& c, const std::string& name, bench::JsonLinesOut& out, dist::Communicator* comm) {
  const Device device = comm ? comm->device() : Device::parse(c.device);
  const nn::PrecisionScope precision(nn::parse_precision(c.precision, "bench train"));
  Generator gen(0);
  nn::LanguageModel model(bench::lm_config(c.size, name == "softmax" ? 'S' : 'R'), gen);
  model.to(device);
  train::AdamW optimizer(model.named_parameters(), {.lr = 3e-4, .weight_decay = 0.01});
  Generator data_gen(comm ? comm->rank() : 0);  // each rank its own rows
  const train::Batch batch{randint(0, c.size.vocab, {c.batch, c.seq}, device, &data_gen),
                           randint(0, c.size.vocab, {c.batch, c.seq}, device, &data_gen)};
  std::optional<train::GradientSync> gradients;
  if (comm) gradients.emplace(*comm, model.parameters());
  bool together = false;  // data-parallel steps, or this rank alone
  auto step = [&] {
    std::optional<train::ParallelStep> parallel;
    if (together) parallel.emplace(train::ParallelStep{*gradients});
    train::train_step(model, optimizer, {batch}, 1.0, device, parallel ? &*parallel : nullptr);
    if (device.is_cuda()) cuda::synchronize(device.index);
  };
  if (device.is_cuda()) {
    step();  // the allocator's pools fill on the first step
    cuda::reset_peak(device.index);
  }
  double ms = bench::median_ms(c.repeats, step, c.warmup);
  const double alone_ms = ms;
  if (comm) {
    dist::barrier(*comm);
    together = true;
    ms = bench::median_ms(c.repeats, step, c.warmup);
    if (comm->rank() != 0) return;
  }
  const int64_t world = comm ? comm->size() : 1;
  bench::JsonLine line;
  line.add("bench", "train").add("model", name).add("device", device.str()).add("params", model.num_parameters());
  bench::add_lm_size(line, c.size).add("B", c.batch).add("T", c.seq);
  line.add("precision", c.precision).add("gpus", world).add("step_ms", ms);
  line.add("tok_s", static_cast<double>(c.batch * c.seq * world) / ms * 1000.0);
  if (comm) line.add("alone_step_ms", alone_ms).add("comm_share", 1.0 - alone_ms / ms);
  if (device.is_cuda()) {
    // peak_gib: the allocator's blocks; peak_requested_gib: the requests, as PyTorch counts them.
    const cuda::MemoryStats memory = cuda::memory_stats(device.index);
    line.add("peak_gib", static_cast<double>(memory.peak) / (1 << 30));
    line.add("peak_requested_gib", static_cast<double>(memory.peak_requested) / (1 << 30));
  }
  out.write(line);
}

int run(const std::string& program, std::span<const std::string> args) {
  Config c;
  Flags flags(program, "Times full training steps of the standard benchmark LM (JSON lines).");
  flags.add("device", &c.device, "cuda (the GPU configuration) or cpu (the CPU configuration)");
  flags.add("models", &c.models, "comma-separated: softmax, regla");
  bench::add_lm_size_flags(flags, c.size,
                           {.vocab = "vocabulary (0: the device's standard)", .d_model = "width (0: standard)",
                            .layers = "layers (0: standard)", .heads = "heads (0: standard)"});
  flags.add("batch", &c.batch, "batch (0: standard)");
  flags.add("seq", &c.seq, "sequence length (0: standard)");
  flags.add("repeats", &c.repeats, "timed steps (the median is reported)");
  flags.add("warmup", &c.warmup, "untimed steps first");
  flags.add("out", &c.out, "also write the JSON lines to this file");
  add_precision_flag(flags, c.precision);
  ScaleOut scale;
  add_scale_out_flags(flags, scale);
  if (!flags.parse(args)) return 0;
  if (should_launch(scale, flags)) return launch_local_ranks(scale, {"bench", "train"}, args);
  std::unique_ptr<dist::Communicator> comm;
  if (const std::optional<tools::RankEnvironment> env = tools::rank_environment()) {
    c.device = "cuda";
    comm = join_run(*env, scale);
  }
  fill_standard(c, Device::parse(c.device).is_cuda());
  bench::JsonLinesOut out(c.out);
  size_t start = 0;
  while (start <= c.models.size()) {
    const size_t end = std::min(c.models.find(',', start), c.models.size());
    const std::string name = c.models.substr(start, end - start);
    if (name != "softmax" && name != "regla") flags.fail("unknown model '" + name + "' (softmax, regla)");
    bench_model(c, name, out, comm.get());
    start = end + 1;
  }
  if (comm) comm->close();
  return 0;
}

}  // namespace

Command bench_train_target() { return {"train", "training steps/s of the standard LM (softmax and ReGLA)", run}; }

}  // namespace linea::cli
