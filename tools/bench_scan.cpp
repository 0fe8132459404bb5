// `linea bench scan`: the gated linear scan (autograd/ops.h: gated_linear_scan) in three
// measurements, each printed as JSON lines:
//   kernel  the fused op alone at the anchor's kernel shape (../shared/bench/torch_bench.py's
//           bench_kernel, which times flash-linear-attention's chunk_gla; tools/gpu/anchor.py runs
//           it in the same session): B=8, H=8, d=64, T = --lengths, forward and forward + backward,
//           for the GLA gate (a log decay per key channel) and ReGLA's (per value channel, with the
//           running key max's one per step), for each --algorithms; median times and peak memory.
//   op      forward + backward of the fused op against the composite chunked scan it replaces
//           (nn/linear_attention/scan.h: chunked_scan) at one layer's shape, with ReGLA's decays;
//   step    one training step of a language model whose linear layers run one or the other (the
//           layer option scan), everything else equal.
// op and step time the two contenders alternately, call by call, so that load from other
// processes falls on both alike; each line has the medians of wall time and of this process's CPU
// time (on a shared machine the wall time alone says little) and the ratio composite / fused. On
// CUDA each call ends with a synchronization (the CPU time is then the host's).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "autograd/ops.h"
#include "cuda/backend.h"
#include "cuda/memory.h"
#include "nn/linear_attention/scan.h"
#include "nn/model.h"
#include "tools/bench_util.h"
#include "tools/commands.h"
#include "tools/flags.h"

namespace linea::cli {

namespace {

using bench::JsonLine;
using bench::JsonLinesOut;
using bench::median;

struct Config : bench::TimingOptions {
  int64_t batch = 16, tokens = 128, d_model = 128, heads = 4, vocab = 112;
  std::string pattern = "RRRR";
  std::string device = "cpu";
  bench::ListFlag what;  // default: kernel,op,step on CUDA, op,step on the CPU
  bench::ListFlag lengths{"1024,4096,16384"};
  bench::ListFlag algorithms{"chunked,sequential"};
  bench::ListFlag state_passes;  // kernel, chunked: each way of passing the state (default: the current one)
  std::string dtype = "float32";  // kernel: q, k, v and dout (bfloat16: decays and states float32)
  int64_t kernel_batch = 8;       // kernel: sequences (the anchor's B)
};

double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

double wall_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Waits for the device's queued work (a GPU call returns once its kernels are queued).
void finish(Device device) {
  if (device.is_cuda()) cuda::synchronize(device.index);
}

// Median wall and CPU milliseconds of two contenders, timed alternately after one warmup each.
struct Timing {
  double wall_a, cpu_a, wall_b, cpu_b;
};
Timing time_pair(int repeats, Device device, const std::function<void()>& a, const std::function<void()>& b) {
  a();
  b();
  finish(device);
  std::vector<double> wa, ca, wb, cb;
  auto time_one = [&](const std::function<void()>& f, std::vector<double>& wall, std::vector<double>& cpu) {
    const double w0 = wall_ms(), c0 = cpu_ms();
    f();
    finish(device);
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

// --state-passes: how the chunked kernels pass the state between chunks (cuda/backend.h).
std::vector<cuda::ScanStatePass> parse_state_passes(const Flags& flags, const bench::ListFlag& passes) {
  if (passes.text().empty()) return {cuda::scan_state_pass()};
  std::vector<cuda::ScanStatePass> out;
  for (const std::string& name : passes.items()) {
    cuda::ScanStatePass pass = cuda::ScanStatePass::kAuto;
    if (!cuda::scan_state_pass_named(name, &pass)) passes.fail(flags, "auto, kernels and chain", name);
    out.push_back(pass);
  }
  return out;
}

nn::linear::ScanKernel parse_kernel_flag(const Flags& flags, const bench::ListFlag& algorithms,
                                         const std::string& name) {
  if (name == "chunked") return nn::linear::ScanKernel::Chunked;
  if (name == "sequential") return nn::linear::ScanKernel::Sequential;
  algorithms.fail(flags, "chunked and sequential", name);
}

// The anchor's kernel shape (see the file's header). The inputs follow torch_bench.py's draws: q, k
// uniform in [0, 1), v normal, log decays logsigmoid(normal + 3); ReGLA's one per step, the running
// key max's, is small (it only moves when a new maximum appears).
void bench_kernel(const Config& cfg, const Flags& flags, JsonLinesOut& out) {
  const Device device = Device::parse(cfg.device);
  const int64_t B = cfg.kernel_batch;
  constexpr int64_t H = 8, d = 64;
  const std::vector<cuda::ScanStatePass> passes = parse_state_passes(flags, cfg.state_passes);
  const cuda::ScanStatePass setting = cuda::scan_state_pass();
  for (const int64_t T : cfg.lengths.positive_numbers(flags))
    for (const char* gate : {"gla", "regla"})
      for (const std::string& name : cfg.algorithms.items())
        for (const cuda::ScanStatePass pass : passes) {
          const nn::linear::ScanKernel kernel = parse_kernel_flag(flags, cfg.algorithms, name);
          if (kernel != nn::linear::ScanKernel::Chunked && pass != passes.front()) continue;  // no state pass to pick
          cuda::set_scan_state_pass(pass);
          Generator gen(1);
          // (B, T, H, d), as the layers' projections, seen as (B, H, T, d).
          // q, k, v and dout in --dtype; the log decays float32 (a bfloat16 scan's are).
          const DType dtype = cfg.dtype == "bfloat16" ? kBFloat16 : kFloat32;
          auto heads_first = [&](const Tensor& x) { return transpose(to(x, device), 1, 2).requires_grad_(); };
          auto activation = [&](const Tensor& x) { return heads_first(to(x, dtype)); };
          const Tensor q = activation(rand({B, T, H, d}, kFloat32, &gen));
          const Tensor k = activation(rand({B, T, H, d}, kFloat32, &gen));
          const Tensor v = activation(randn({B, T, H, d}, kFloat32, &gen));
          const Tensor decay = heads_first(logsigmoid(randn({B, T, H, d}, kFloat32, &gen) + 3.0));
          const bool regla = std::string(gate) == "regla";
          const Tensor gk = regla ? heads_first(uniform({B, T, H, 1}, -0.05, 0.0, kFloat32, &gen)) : decay;
          const Tensor gv = regla ? decay : Tensor();
          const Tensor dout = to(to(randn({B, H, T, d}, kFloat32, &gen), dtype), device);
          std::vector<Tensor> inputs = {q, k, v, gk};
          if (gv.defined()) inputs.push_back(gv);
          nn::linear::ScanOptions options;
          options.kernel = kernel;
          auto forward_backward = [&] {
            grad(nn::linear::scan(q, k, v, gk, gv, Tensor(), nullptr, options), inputs, dout);
            finish(device);
          };
          auto forward = [&] {
            NoGradGuard no_grad;
            nn::linear::scan(q, k, v, gk, gv, Tensor(), nullptr, options);
            finish(device);
          };
          JsonLine line;
          line.add("bench", "scan_kernel").add("device", device.str()).add("gate", gate).add("algorithm", name);
          if (kernel == nn::linear::ScanKernel::Chunked) line.add("state_pass", cuda::scan_state_pass_name(pass));
          line.add("B", B).add("H", H).add("T", T).add("D", d).add("dtype", cfg.dtype);
          line.add("fwd_bwd_ms", bench::median_ms(cfg.repeats, forward_backward, 2));
          line.add("fwd_ms", bench::median_ms(cfg.repeats, forward, 2));
          if (device.is_cuda()) {
            const int64_t before = cuda::memory_stats(device.index).in_use;
            cuda::reset_peak(device.index);
            forward_backward();
            line.add("peak_mib", static_cast<double>(cuda::memory_stats(device.index).peak - before) / (1 << 20));
          }
          out.write(line);
        }
  cuda::set_scan_state_pass(setting);
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
  auto model_with = [&](const char* scan) {
    nn::ModelConfig c = mc;
    for (const char letter : std::string("LHAFGRUW"))
      if (c.pattern.find(letter) != std::string::npos) c.layers[std::string(1, letter)]["scan"] = scan;
    Generator gen(7);
    auto model = std::make_shared<nn::LanguageModel>(c, gen);
    model->to(device);
    return model;
  };
  const auto fused = model_with("chunked"), composite = model_with("composite");
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
              "Times the gated linear scan and prints one JSON object per measurement (--what):\n"
              "  kernel      the fused op alone at the PyTorch anchor's kernel shape (B=8, H=8, d=64, T =\n"
              "              --lengths), forward and forward + backward, GLA's and ReGLA's gates, each of\n"
              "              --algorithms, with peak memory (default on CUDA);\n"
              "  op          forward + backward of the fused op against the composite chunked scan at one\n"
              "              layer's shape (float32);\n"
              "  step        forward + backward of a language model of --pattern whose linear layers use one\n"
              "              or the other (their option scan).\n"
              "op and step alternate the two call by call and report medians of wall and process CPU time\n"
              "(ratio = composite / fused).");
  bench::add_timing_flags(flags, cfg);
  cfg.what.add_to(flags, "what", "comma-separated: kernel, op, step (default: all on CUDA, op,step on the CPU)");
  cfg.lengths.add_to(flags, "lengths", "kernel: comma-separated sequence lengths");
  cfg.algorithms.add_to(flags, "algorithms", "kernel: comma-separated: chunked, sequential");
  cfg.state_passes.add_to(flags, "state-passes",
                          "kernel, chunked: comma-separated ways the state passes between chunks: kernels (its own "
                          "kernels), chain (from block to block), auto (one of them by the number of chains; "
                          "cuda/backend.h), each timed in turn (default: the current one, LINEA_SCAN_STATES)");
  flags.add_choice("dtype", &cfg.dtype, {"float32", "bfloat16"},
                   "kernel: q, k, v and dout (bfloat16: the products on the bfloat16 tensor cores, decays and "
                   "states float32)");
  flags.add("kernel-batch", &cfg.kernel_batch,
            "kernel: sequences B (the anchor's is 8; with fewer, the chained state pass's latency can be the "
            "critical path)");
  flags.add("batch", &cfg.batch, "op, step: sequences per step");
  flags.add("tokens", &cfg.tokens, "op, step: tokens per sequence");
  flags.add("d-model", &cfg.d_model, "op, step: model width");
  flags.add("heads", &cfg.heads, "op, step: heads per layer (head dim = d-model / heads)");
  flags.add("vocab", &cfg.vocab, "step: vocabulary size");
  flags.add("pattern", &cfg.pattern, "step: layer letters of the model (nn/model.h)");
  flags.add("device", &cfg.device, "cpu or cuda[:index]");
  if (!bench::parse(flags, args, cfg)) return 0;
  if (cfg.batch < 1 || cfg.tokens < 1 || cfg.vocab < 1 || cfg.kernel_batch < 1)
    flags.fail("--batch, --kernel-batch, --tokens and --vocab must be positive");
  if (cfg.heads < 1 || cfg.d_model % cfg.heads != 0) flags.fail("--heads must divide --d-model");
  const Device device = Device::parse(cfg.device);
  const std::string default_what = device.is_cuda() ? "kernel,op,step" : "op,step";
  const std::string what = cfg.what.text().empty() ? default_what : cfg.what.text();

  JsonLinesOut out(cfg.out);
  const bench::ThreadsForBench threads(cfg.threads);
  for (const std::string& measurement : bench::split_list(what)) {
    if (measurement == "kernel") bench_kernel(cfg, flags, out);
    else if (measurement == "op") bench_op(cfg, out);
    else if (measurement == "step") bench_step(cfg, out);
    else cfg.what.fail(flags, "kernel, op and step", measurement);
  }
  return 0;
}

}  // namespace

Command bench_scan_target() {
  return {"scan", "the gated scan: the fused op alone at the anchor's shape, and against the composite scan", run};
}

}  // namespace linea::cli
