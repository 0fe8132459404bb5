// `linea bench ops`: the forward kernels against their anchors, in the same run.
//   matmul        linea::matmul vs a bare cblas_sgemm on the same input buffers (target: within
//                 10%), and a batch of small matmuls in one call vs a loop of bare calls.
//   elementwise,  each timed on 1 thread and on --threads, so the speedup shows whether the
//   reduction     thread pool is used, and against a plain one-thread loop over the same data.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/ops.h"
#include "cpu/parallel.h"
#include "tools/bench_util.h"
#include "tools/commands.h"
#include "tools/flags.h"

namespace linea::cli {

namespace {

using bench::JsonLine;
using bench::JsonLinesOut;

struct Config : bench::TimingOptions {
  int64_t matmul_size = 1024;
  int64_t numel = int64_t{1} << 24;
};

// Row length of the matrices the reductions run on: long enough that a row is real work.
constexpr int64_t kRowLength = 4096;

// Single-precision gemm over contiguous row-major (m, k) and (k, n) matrices, as a caller who
// skips linea would write it.
void bare_sgemm(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}

// a (batch, m, k) @ b (batch, k, n): one linea::matmul call against `batch` bare sgemm calls
// writing into a preallocated output.
void bench_matmul(const Config& cfg, int64_t batch, int64_t m, int64_t n, int64_t k, JsonLinesOut& out) {
  const Shape batch_dims = batch > 1 ? Shape{batch} : Shape{};
  auto with_batch = [&](int64_t rows, int64_t cols) {
    Shape s = batch_dims;
    s.insert(s.end(), {rows, cols});
    return s;
  };
  const Tensor a = randn(with_batch(m, k)), b = randn(with_batch(k, n));
  const Tensor c = empty(with_batch(m, n));
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = c.data<float>();

  const auto [linea_ms, bare_ms] = bench::median_ms_pair(
      cfg.repeats, [&] { matmul(a, b); },
      [&] {
        for (int64_t i = 0; i < batch; ++i) bare_sgemm(m, n, k, pa + i * m * k, pb + i * k * n, pc + i * m * n);
      });
  const double flop = 2.0 * static_cast<double>(batch * m * n * k);
  out.write(JsonLine()
                .add("bench", "matmul")
                .add("dtype", "float32")
                .add("batch", batch)
                .add("m", m)
                .add("n", n)
                .add("k", k)
                .add("threads", openblas_get_num_threads())
                .add("repeats", cfg.repeats)
                .add("linea_ms", linea_ms)
                .add("bare_ms", bare_ms)
                .add("linea_gflops", flop / (linea_ms * 1e6))
                .add("bare_gflops", flop / (bare_ms * 1e6))
                .add("ratio", linea_ms / bare_ms)
                .add("max_abs_diff", max_abs_diff(matmul(a, b), c)));
}

// One op on large data: linea's kernel, and the plain loop it should come close to on one thread.
struct ParallelCase {
  const char* kind;  // "elementwise" or "reduction"
  const char* op;
  Shape shape;               // of the input
  double bytes;              // read plus written, for the bandwidth figure
  std::function<Tensor()> linea;
  std::function<void()> bare;  // single thread, writing into bare_out
  Tensor bare_out;
};

std::vector<ParallelCase> parallel_cases(const Tensor& x, const Tensor& y) {
  const int64_t rows = x.size(0), cols = x.size(1), numel = x.numel();
  const float* px = x.data<float>();
  const float* py = y.data<float>();
  const double f = sizeof(float);
  // Each case's bare loop writes into its own preallocated output, as a hand-written kernel would.
  auto map = [&](const char* op, int inputs, std::function<Tensor()> linea, float (*fn)(float, float)) {
    const Tensor o = empty(x.shape());
    float* po = o.data<float>();
    return ParallelCase{"elementwise", op, x.shape(), (inputs + 1) * numel * f, std::move(linea),
                        [=] {
                          for (int64_t i = 0; i < numel; ++i) po[i] = fn(px[i], py[i]);
                        },
                        o};
  };
  auto reduce = [&](const char* op, std::function<Tensor()> linea, int64_t out_rows, int64_t out_cols,
                    Shape out_shape) {
    // out[r / (rows / out_rows)][c % out_cols] += x[r][c], summed in double like linea's kernel.
    const Tensor o = empty(out_shape);
    float* po = o.data<float>();
    return ParallelCase{"reduction", op, x.shape(), numel * f, std::move(linea),
                        [=] {
                          std::vector<double> acc(out_rows * out_cols, 0.0);
                          const int64_t rows_per_out = rows / out_rows;
                          for (int64_t r = 0; r < rows; ++r) {
                            double* a = acc.data() + (r / rows_per_out) * out_cols;
                            const float* row = px + r * cols;
                            if (out_cols == 1) {
                              double s = 0;
                              for (int64_t c = 0; c < cols; ++c) s += row[c];
                              a[0] += s;
                            } else {
                              for (int64_t c = 0; c < cols; ++c) a[c] += row[c];
                            }
                          }
                          std::copy(acc.begin(), acc.end(), po);
                        },
                        o};
  };
  std::vector<ParallelCase> cases;
  cases.push_back(map("add", 2, [=] { return add(x, y); }, [](float a, float b) { return a + b; }));
  cases.push_back(map("exp", 1, [=] { return exp(x); }, [](float a, float) { return std::exp(a); }));
  cases.push_back(map("gelu", 1, [=] { return gelu(x); },
                      [](float a, float) { return 0.5f * a * (1.0f + std::erf(a * 0.70710678f)); }));
  cases.push_back(reduce("sum_all", [=] { return sum(x); }, 1, 1, {}));
  cases.push_back(reduce("sum_last_dim", [=] { return sum(x, {-1}); }, rows, 1, {rows}));
  cases.push_back(reduce("sum_leading_dim", [=] { return sum(x, {0}); }, 1, cols, {cols}));
  return cases;
}

void bench_parallel(const Config& cfg, JsonLinesOut& out) {
  const int64_t rows = cfg.numel / kRowLength;
  const Tensor x = randn({rows, kRowLength}), y = randn({rows, kRowLength});
  for (const ParallelCase& c : parallel_cases(x, y)) {
    cpu::set_num_threads(1);
    const auto [one_thread_ms, bare_ms] = bench::median_ms_pair(cfg.repeats, c.linea, c.bare);
    cpu::set_num_threads(cfg.threads);
    const double threaded_ms = bench::median_ms(cfg.repeats, c.linea);
    out.write(JsonLine()
                  .add("bench", c.kind)
                  .add("op", c.op)
                  .add("dtype", "float32")
                  .add("shape", c.shape)
                  .add("threads", cfg.threads)
                  .add("repeats", cfg.repeats)
                  .add("ms_1_thread", one_thread_ms)
                  .add("ms_threads", threaded_ms)
                  .add("speedup", one_thread_ms / threaded_ms)
                  .add("bare_loop_ms", bare_ms)
                  .add("ratio_1_thread_vs_bare", one_thread_ms / bare_ms)
                  .add("gb_per_s", c.bytes / (threaded_ms * 1e6))
                  .add("max_abs_diff", max_abs_diff(c.linea(), c.bare_out)));
  }
}

int run(const std::string& program, std::span<const std::string> args) {
  Config cfg;
  Flags flags(program,
              "Times linea's forward kernels against their anchors in the same run and prints one JSON\n"
              "object per measurement (medians over --repeats, after a warmup):\n"
              "  matmul       linea::matmul vs bare cblas_sgemm on the same buffers (ratio = linea/bare),\n"
              "               one large product and a batch of 64 small ones;\n"
              "  elementwise  add, exp, gelu and\n"
              "  reduction    sum over all, the last dim and the leading dim, each on 1 thread and on\n"
              "               --threads (speedup), and against a plain one-thread loop.");
  bench::add_timing_flags(flags, cfg);
  flags.add("matmul-size", &cfg.matmul_size, "M = N = K of the large matmul");
  flags.add("numel", &cfg.numel, "elements of the elementwise and reduction inputs (rows of 4096)");
  if (!bench::parse(flags, args, cfg)) return 0;
  if (cfg.matmul_size < 1) flags.fail("--matmul-size must be at least 1");
  if (cfg.numel < kRowLength) flags.fail("--numel must be at least " + std::to_string(kRowLength));

  NoGradGuard forward_only;
  JsonLinesOut out(cfg.out);
  const bench::ThreadsForBench threads(cfg.threads);
  bench_matmul(cfg, 1, cfg.matmul_size, cfg.matmul_size, cfg.matmul_size, out);
  bench_matmul(cfg, 64, 64, 64, 64, out);
  bench_parallel(cfg, out);
  return 0;
}

}  // namespace

Command bench_ops_target() {
  return {"ops", "matmul vs bare OpenBLAS; elementwise and reductions on 1 vs all threads", run};
}

}  // namespace linea::cli
