// `linea bench attention`: the fused causal softmax attention, forward + backward, at long
// sequences (B=8, H=8, dh=64; T = 1k, 4k, 16k by default), as ../shared/bench/torch_bench.py
// times PyTorch's scaled_dot_product_attention; in float32 or bfloat16 (`--dtype`, as
// tools/gpu/anchor.py's sdpa and sdpa_bf16).
#include "autograd/ops.h"
#include "cuda/memory.h"
#include "tools/bench_util.h"
#include "tools/commands.h"
#include "tools/flags.h"

namespace linea::cli {

namespace {

struct Config : bench::TimingOptions {
  std::string device = "cuda", dtype = "float32";
  bench::ListFlag lengths{"1024,4096,16384"};
  int64_t batch = 8, heads = 8, head_dim = 64, window = 0;
};

int run(const std::string& program, std::span<const std::string> args) {
  Config c;
  Flags flags(program, "Times the fused causal attention, forward + backward (JSON lines).");
  flags.add("device", &c.device, "cuda or cpu");
  c.lengths.add_to(flags, "lengths", "comma-separated sequence lengths");
  flags.add("batch", &c.batch, "batch");
  flags.add("heads", &c.heads, "heads");
  flags.add("head-dim", &c.head_dim, "head dim");
  flags.add("window", &c.window, "sliding window (0: full causal)");
  flags.add_choice("dtype", &c.dtype, {"float32", "bfloat16"},
                   "q, k, v and the gradients' dtype (bfloat16: float32 accumulation and statistics)");
  bench::add_timing_flags(flags, c);
  if (!bench::parse(flags, args, c)) return 0;
  if (c.batch < 1 || c.heads < 1 || c.head_dim < 1) flags.fail("--batch, --heads and --head-dim must be at least 1");
  if (c.window < 0) flags.fail("--window must be 0 (full causal) or positive");
  const std::vector<int64_t> lengths = c.lengths.positive_numbers(flags);
  const Device device = Device::parse(c.device);
  const bench::ThreadsForBench threads(c.threads);
  const int64_t batch = c.batch, heads = c.heads, head_dim = c.head_dim, window = c.window;
  const DType dtype = c.dtype == "bfloat16" ? kBFloat16 : kFloat32;
  bench::JsonLinesOut out(c.out);
  for (const int64_t t : lengths) {
    Generator gen(0);
    auto draw = [&] { return to(randn({batch, heads, t, head_dim}, {kFloat32, device}, &gen), dtype); };
    Tensor q = draw().requires_grad_(), k = draw().requires_grad_(), v = draw().requires_grad_();
    const Tensor dout = draw();
    auto sync = [&] {
      if (device.is_cuda()) cuda::synchronize(device.index);
    };
    auto forward_backward = [&] {
      const Tensor o = scaled_dot_product_attention(q, k, v, window);
      grad(o, {q, k, v}, dout);
      sync();
    };
    auto forward = [&] {
      NoGradGuard no_grad;
      scaled_dot_product_attention(q, k, v, window);
      sync();
    };
    bench::JsonLine line;
    line.add("bench", "attention").add("device", device.str()).add("B", batch).add("H", heads).add("T", t);
    line.add("D", head_dim).add("window", window).add("dtype", c.dtype);
    if (device.is_cpu()) line.add("threads", c.threads);
    line.add("fwd_bwd_ms", bench::median_ms(c.repeats, forward_backward, 2));
    line.add("fwd_ms", bench::median_ms(c.repeats, forward, 2));
    out.write(line);
  }
  return 0;
}

}  // namespace

Command bench_attention_target() { return {"attention", "fused causal attention forward + backward at long T", run}; }

}  // namespace linea::cli
