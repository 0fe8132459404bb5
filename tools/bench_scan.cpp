// `linea bench scan`: the fused gated linear scan (autograd/ops.h: gated_linear_scan) against the
// composite chunked scan it replaces (nn/linear/scan.h: chunked_scan), in the same run, the two
// timed alternately call by call so that load from other processes falls on both alike:
//   op    forward + backward of the scan alone at one layer's shape, with ReGLA's decays (per
//         channel on the value dim, plus the running key max's scalar one);
//   step  one training step (forward, loss, backward) of a language model whose linear layers
//         run one scan or the other (the layer option fused_scan), everything else equal.
// Each line has the medians of wall time and of this process's CPU time (on a shared machine the
// wall time alone says little) and the ratio composite / fused. With --device cuda the same runs
// on the GPU (each call ends with a synchronization; the CPU time is then the host's).
#include <cblas.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "autograd/ops.h"
#include "cuda/memory.h"
#include "nn/linear/scan.h"
#include "nn/model.h"
#include "tensor/cpu/parallel.h"
#include "tools/bench_util.h"
#include "tools/commands.h"
#include "tools/flags.h"

namespace linea::cli {

namespace {

using bench::JsonLine;
using bench::JsonLinesOut;
using bench::add_timing_flags;
using bench::check_timing_flags;

struct Config {
  int repeats = 10;
  int threads = cpu::num_threads();
  std::string out;
  int64_t batch = 16, tokens = 128, d_model = 128, heads = 4, vocab = 112;
  std::string pattern = "RRRR";
  std::string device = "cpu";
};

double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

double wall_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Median wall and CPU milliseconds of two contenders, timed alternately after one warmup each.
struct Timing {
  double wall_a, cpu_a, wall_b, cpu_b;
};
Timing time_pair(int repeats, Device device, const std::function<void()>& a, const std::function<void()>& b) {
  // A GPU call returns when its kernels are queued: wait for them inside the timed span.
  auto finish = [device] {
    if (device.is_cuda()) cuda::synchronize(device.index);
  };
  a();
  b();
  finish();
  std::vector<double> wa, ca, wb, cb;
  auto time_one = [&](const std::function<void()>& f, std::vector<double>& wall, std::vector<double>& cpu) {
    const double w0 = wall_ms(), c0 = cpu_ms();
    f();
    finish();
    cpu.push_back(cpu_ms() - c0);
    wall.push_back(wall_ms() - w0);
  };
  for (int i = 0; i < repeats; ++i) {
    time_one(a, wa, ca);
    time_one(b, wb, cb);
  }
  return {median(wa), median(ca), median(wb), median(cb)};
}

JsonLine timing_line(const char* what, const Config& cfg, const Timing& t) {
  return JsonLine()
      .add("bench", what)
      .add("device", cfg.device)
      .add("threads", cfg.threads)
      .add("repeats", cfg.repeats)
      .add("fused_ms", t.wall_a)
      .add("fused_cpu_ms", t.cpu_a)
      .add("composite_ms", t.wall_b)
      .add("composite_cpu_ms", t.cpu_b)
      .add("ratio", t.wall_b / t.wall_a)
      .add("cpu_ratio", t.cpu_b / t.cpu_a);
}

// The scan alone at the shape of one of the model's layers (dk = dv = head dim; ReGLA's sum
// normalization is off, so no extra value column).
void bench_op(const Config& cfg, JsonLinesOut& out) {
  const int64_t B = cfg.batch, H = cfg.heads, T = cfg.tokens, d = cfg.d_model / cfg.heads;
  const Device device = Device::parse(cfg.device);
  Generator gen(1);
  auto leaf = [&](const Tensor& x) { return to(x, device).requires_grad_(); };
  const Tensor q = leaf(randn({B, H, T, d}, kFloat32, &gen)), k = leaf(randn({B, H, T, d}, kFloat32, &gen));
  const Tensor v = leaf(randn({B, H, T, d}, kFloat32, &gen));
  const Tensor gk = leaf(uniform({B, H, T, 1}, -0.1, 0.0, kFloat32, &gen));
  const Tensor gv = leaf(uniform({B, H, T, d}, -1.0, -0.01, kFloat32, &gen));
  const Tensor u = to(randn({B, H, T, d}, kFloat32, &gen), device);
  const std::vector<Tensor> inputs = {q, k, v, gk, gv};
  Tensor o_fused, o_composite;
  const Timing t = time_pair(
      cfg.repeats, device,
      [&] {
        o_fused = gated_linear_scan(q, k, v, gk, gv);
        grad(sum(o_fused * u), inputs);
      },
      [&] {
        o_composite = nn::linear::chunked_scan(q, k, v, gk, gv);
        grad(sum(o_composite * u), inputs);
      });
  out.write(timing_line("scan_op", cfg, t)
                .add("shape", std::vector<int64_t>{B, H, T, d, d})
                .add("max_abs_diff", max_abs_diff(detach(o_fused), detach(o_composite))));
}

// One training step of the model with each scan; both models start from the same weights.
void bench_step(const Config& cfg, JsonLinesOut& out) {
  const Device device = Device::parse(cfg.device);
  nn::ModelConfig mc;
  mc.vocab_size = cfg.vocab;
  mc.d_model = cfg.d_model;
  mc.heads = cfg.heads;
  mc.pattern = cfg.pattern;
  auto model_with = [&](bool fused) {
    nn::ModelConfig c = mc;
    for (const char letter : std::string("LHAFGRUW"))
      if (c.pattern.find(letter) != std::string::npos) c.layers[std::string(1, letter)]["fused_scan"] = fused;
    Generator gen(7);
    auto model = std::make_shared<nn::LanguageModel>(c, gen);
    model->to(device);
    return model;
  };
  const auto fused = model_with(true), composite = model_with(false);
  Generator gen(8);
  const Tensor ids = randint(0, cfg.vocab, {cfg.batch, cfg.tokens}, device, &gen);
  const Tensor targets = randint(0, cfg.vocab, {cfg.batch, cfg.tokens}, device, &gen);
  double loss_fused = 0, loss_composite = 0;
  auto step = [&](nn::LanguageModel& model, double& loss) {
    model.zero_grad();
    const Tensor l = model.loss(ids, targets);
    backward(l);
    loss = l.item();
  };
  const Timing t =
      time_pair(cfg.repeats, device, [&] { step(*fused, loss_fused); }, [&] { step(*composite, loss_composite); });
  out.write(timing_line("train_step", cfg, t)
                .add("pattern", cfg.pattern)
                .add("batch", cfg.batch)
                .add("tokens", cfg.tokens)
                .add("d_model", cfg.d_model)
                .add("heads", cfg.heads)
                .add("loss_diff", loss_fused - loss_composite));
}

int run(const std::string& program, std::span<const std::string> args) {
  Config cfg;
  Flags flags(program,
              "Times the fused gated scan against the composite chunked scan in the same run, alternating\n"
              "call by call, and prints one JSON object per measurement (medians over --repeats of wall\n"
              "and process CPU time; ratio = composite / fused):\n"
              "  scan_op     forward + backward of the scan alone at one layer's shape (float32);\n"
              "  train_step  forward + backward of a language model of --pattern whose linear layers\n"
              "              use one scan or the other (their option fused_scan).");
  add_timing_flags(flags, &cfg.repeats, &cfg.threads, &cfg.out);
  flags.add("batch", &cfg.batch, "sequences per step");
  flags.add("tokens", &cfg.tokens, "tokens per sequence");
  flags.add("d-model", &cfg.d_model, "model width");
  flags.add("heads", &cfg.heads, "heads per layer (head dim = d-model / heads)");
  flags.add("vocab", &cfg.vocab, "vocabulary size");
  flags.add("pattern", &cfg.pattern, "layer letters of the model (nn/model.h)");
  flags.add("device", &cfg.device, "cpu or cuda[:index]");
  if (!flags.parse(args)) return 0;
  check_timing_flags(flags, cfg.repeats, cfg.threads);
  if (cfg.batch < 1 || cfg.tokens < 1 || cfg.vocab < 1) flags.fail("--batch, --tokens and --vocab must be positive");
  if (cfg.heads < 1 || cfg.d_model % cfg.heads != 0) flags.fail("--heads must divide --d-model");

  JsonLinesOut out(cfg.out);
  const int previous_threads = cpu::num_threads();
  openblas_set_num_threads(cfg.threads);
  cpu::set_num_threads(cfg.threads);
  bench_op(cfg, out);
  bench_step(cfg, out);
  cpu::set_num_threads(previous_threads);
  return 0;
}

}  // namespace

Command bench_scan_target() {
  return {"scan", "the fused gated scan vs the composite chunked scan: the op, and a training step", run};
}

}  // namespace linea::cli
