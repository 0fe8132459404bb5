// `linea bench attention`: the fused causal softmax attention, forward + backward, at long
// sequences (B=8, H=8, dh=64; T = 1k, 4k, 16k by default), as ../shared/bench/torch_bench.py
// times PyTorch's scaled_dot_product_attention. float32 (the anchor also reports bf16).
#include "autograd/ops.h"
#include "cuda/memory.h"
#include "tools/bench_util.h"
#include "tools/commands.h"
#include "tools/flags.h"

namespace linea::cli {

namespace {

int run(const std::string& program, std::span<const std::string> args) {
  std::string device_name = "cuda", lengths = "1024,4096,16384", out_path;
  int64_t batch = 8, heads = 8, head_dim = 64, window = 0;
  int repeats = 10;
  Flags flags(program, "Times the fused causal attention, forward + backward (JSON lines).");
  flags.add("device", &device_name, "cuda or cpu");
  flags.add("lengths", &lengths, "comma-separated sequence lengths");
  flags.add("batch", &batch, "batch");
  flags.add("heads", &heads, "heads");
  flags.add("head-dim", &head_dim, "head dim");
  flags.add("window", &window, "sliding window (0: full causal)");
  flags.add("repeats", &repeats, "timed repeats (the median is reported)");
  flags.add("out", &out_path, "also write the JSON lines to this file");
  if (!flags.parse(args)) return 0;
  const Device device = Device::parse(device_name);
  bench::JsonLinesOut out(out_path);
  for (const int64_t t : bench::positive_list(flags, "lengths", lengths)) {
    Generator gen(0);
    Tensor q = randn({batch, heads, t, head_dim}, {kFloat32, device}, &gen).requires_grad_();
    Tensor k = randn({batch, heads, t, head_dim}, {kFloat32, device}, &gen).requires_grad_();
    Tensor v = randn({batch, heads, t, head_dim}, {kFloat32, device}, &gen).requires_grad_();
    const Tensor dout = randn({batch, heads, t, head_dim}, {kFloat32, device}, &gen);
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
    line.add("D", head_dim).add("window", window).add("dtype", "float32");
    line.add("fwd_bwd_ms", bench::median_ms(repeats, forward_backward, 2));
    line.add("fwd_ms", bench::median_ms(repeats, forward, 2));
    out.write(line);
  }
  return 0;
}

}  // namespace

Command bench_attention_target() { return {"attention", "fused causal attention forward + backward at long T", run}; }

}  // namespace linea::cli
