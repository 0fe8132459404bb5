// The CUDA gated scan against the CPU kernel, through gated_linear_scan_with_state: outputs,
// final states and the gradients of q, k, v, both log decays and the initial state, for both
// CUDA algorithms (the chunked tensor-core kernels of cuda/kernels/chunked_scan.cu, the default,
// and the sequential ones of gated_scan.cu) and every precision (float64; float32 exact; float32
// on the TF32 tensor cores, chunked only). Every decay layout the layers produce (none, one per
// step, per channel on either side or both), lengths around the chunks (1, 17, 63, 64, 65, 1000),
// head dims 16, 48, 64, 100 and more, q/k and v of different widths; gates at the floor and near
// 1; strided inputs, 16k positions, determinism, and TF32 differing from exact float32 by rounding
// only. Without a GPU every test skips.
#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "tensor/backend.h"
#include "tests/cuda/fused_parity.h"
#include "tests/nn/scan_inputs.h"

namespace linea::testing {
namespace {

struct Precision {
  DType dtype;
  bool tf32;
  std::string name() const { return dtype == kFloat64 ? "float64" : tf32 ? "float32/TF32" : "float32"; }
};
const Precision kPrecisions[] = {{kFloat64, false}, {kFloat32, false}, {kFloat32, true}};

const ScanAlgorithm kAlgorithms[] = {ScanAlgorithm::Chunked, ScanAlgorithm::Sequential};
const char* algorithm_name(ScanAlgorithm a) { return a == ScanAlgorithm::Chunked ? "chunked" : "sequential"; }

// float64: the two devices sum in other orders, nothing more. float32: the state sums up to 1000
// steps in float32, so errors are relative to the magnitudes summed: measured against the largest
// value of each result. TF32 rounds every product's operands to 11 significant bits (2^-11 =
// 4.9e-4 relative): the same measure, with room for sums of many such terms.
Tolerance scan_tolerance(const Precision& p) {
  if (p.dtype == kFloat64) return {1e-10, 1e-11};
  return p.tf32 ? Tolerance{6e-3, 0, true} : Tolerance{3e-5, 0, true};
}

struct Case {
  int64_t batch, heads, steps, dk, dv;
  Decay key, value;
  bool initial_state;
};

std::string decay_name(Decay d) { return d == Decay::None ? "none" : d == Decay::Scalar ? "step" : "channel"; }

std::string label(const Case& c, const Precision& p, ScanAlgorithm a) {
  std::ostringstream os;
  os << algorithm_name(a) << " " << p.name() << " B=" << c.batch << " H=" << c.heads << " T=" << c.steps
     << " dk=" << c.dk << " dv=" << c.dv << " gk=" << decay_name(c.key) << " gv=" << decay_name(c.value)
     << (c.initial_state ? " s0" : "");
  return os.str();
}

// The inputs in the order scan_of reads them.
std::vector<Tensor> draw(const Case& c, DType dtype, uint64_t seed,
                         const LogDecayDraw& log_decay = default_log_decay) {
  const ScanInputs in = draw_scan_inputs(c.key, c.value, c.initial_state,
                                         {c.batch, c.heads, c.steps, c.dk, c.dv}, dtype, seed, log_decay);
  std::vector<Tensor> x = {in.q, in.k, in.v};
  for (const Tensor& t : {in.gk, in.gv, in.s0})
    if (t.defined()) x.push_back(detach(t));
  for (Tensor& t : x) t = detach(t);
  return x;
}

// o and S_T, flattened into one tensor, so that one cotangent checks both and all gradients.
DeviceFn scan_of(const Case& c, ScanAlgorithm algorithm) {
  return [c, algorithm](const std::vector<Tensor>& x) {
    size_t next = 3;
    const Tensor gk = c.key != Decay::None ? x[next++] : Tensor();
    const Tensor gv = c.value != Decay::None ? x[next++] : Tensor();
    const Tensor s0 = c.initial_state ? x[next] : Tensor();
    const ScanResult r = gated_linear_scan_with_state(x[0], x[1], x[2], gk, gv, s0, algorithm);
    return cat({flatten(r.out), flatten(r.final_state)}, 0);
  };
}

// The decay layouts of the layers: none (LA-ReLU, LA-ELU, Hedgehog), one per step on the key side
// (RFA; ReGLA's running key max alone), per key channel (GLA; ReGLA on the key dim with its key max
// folded in), per value channel with one per step (ReGLA), per channel on both sides (Fast Decay),
// and the rest of the combinations.
struct Layout {
  Decay key, value;
};
const Layout kLayouts[] = {{Decay::None, Decay::None},       {Decay::Scalar, Decay::None},
                           {Decay::PerChannel, Decay::None}, {Decay::Scalar, Decay::PerChannel},
                           {Decay::PerChannel, Decay::PerChannel}, {Decay::None, Decay::PerChannel},
                           {Decay::None, Decay::Scalar},     {Decay::PerChannel, Decay::Scalar},
                           {Decay::Scalar, Decay::Scalar}};

// Lengths around the chunk (64; 32 in float64) and widths around the 64-channel tiles: each layout
// meets every length, and the widths rotate so that each layout meets several.
const int64_t kSteps[] = {1, 17, 63, 64, 65, 1000};
const std::pair<int64_t, int64_t> kWidths[] = {{16, 16}, {48, 48},  {64, 64}, {100, 100}, {48, 100},
                                               {100, 16}, {64, 65}, {33, 7},  {1, 64},    {130, 40}};

std::vector<Case> cases() {
  std::vector<Case> out;
  size_t w = 0;
  for (const Layout& l : kLayouts)
    for (int64_t steps : kSteps) {
      const auto [dk, dv] = kWidths[w++ % std::size(kWidths)];
      const int64_t batch = steps >= 1000 ? 1 : 2, heads = steps >= 1000 ? 2 : 3;
      out.push_back({batch, heads, steps, dk, dv, l.key, l.value, w % 2 == 0});
    }
  return out;
}

// Runs f(a label's suffix) once for each way the chunked kernels pass the state between chunks
// (cuda::ScanStatePass: each its own code in them), once for the sequential kernels.
template <class F>
void for_each_state_pass(ScanAlgorithm algorithm, const F& f) {
  if (algorithm != ScanAlgorithm::Chunked) return f(std::string());
  for (const NamedScanStatePass& p : kScanStatePasses) {
    const ScanStatePassSetting setting(p.pass);
    f(std::string(" ") + p.name);
  }
}

void expect_all_cases(ScanAlgorithm algorithm) {
  for_each_state_pass(algorithm, [&](const std::string& pass) {
    uint64_t seed = 1;
    for (const Precision& p : kPrecisions) {
      if (p.tf32 && algorithm != ScanAlgorithm::Chunked) continue;  // the sequential kernels are exact
      const Tf32Setting mode(p.tf32);
      for (const Case& c : cases())
        expect_device_parity(scan_of(c, algorithm), draw(c, p.dtype, seed += 10), scan_tolerance(p),
                             label(c, p, algorithm) + pass);
    }
  });
}

TEST(CudaGatedScan, ChunkedMatchesCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  expect_all_cases(ScanAlgorithm::Chunked);
}

TEST(CudaGatedScan, SequentialMatchesCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  expect_all_cases(ScanAlgorithm::Sequential);
}

// Gates at the layers' floor (log decay -20 every step: the state forgets at once), nearly open
// (-1e-6: nothing decays for 1000 steps), spread over [-20, 0], closed (-inf), and over [-3, 0],
// where some chunks decay little and others much (the kernels' two ways through a chunk). In
// float64 the outputs sum terms up to ~50 while some results are near 0: measured against the
// largest value, like float32.
TEST(CudaGatedScan, ExtremeDecays) {
  LINEA_SKIP_WITHOUT_CUDA();
  struct Extreme {
    const char* name;
    LogDecayDraw draw;
  };
  const Extreme extremes[] = {
      {"floor", [](const Shape& s, Generator&) { return full(s, -20.0, kFloat64); }},
      {"open", [](const Shape& s, Generator&) { return full(s, -1e-6, kFloat64); }},
      {"spread", [](const Shape& s, Generator& gen) { return uniform(s, -20.0, 0.0, kFloat64, &gen); }},
      {"mixed", [](const Shape& s, Generator& gen) { return uniform(s, -3.0, 0.0, kFloat64, &gen); }},
      {"closed", [](const Shape& s, Generator& gen) {
         // Every third step closed, the others open.
         return where(gt(uniform(s, 0.0, 3.0, kFloat64, &gen), full(s, 2.0, kFloat64)),
                      full(s, -std::numeric_limits<double>::infinity(), kFloat64), full(s, -0.01, kFloat64));
       }}};
  for (ScanAlgorithm algorithm : kAlgorithms)
    for_each_state_pass(algorithm, [&](const std::string& pass) {
      for (const Precision& p : kPrecisions) {
        if (p.tf32 && algorithm != ScanAlgorithm::Chunked) continue;
        const Tf32Setting mode(p.tf32);
        for (const Extreme& e : extremes)
          for (const Layout& l : {kLayouts[3], kLayouts[4], kLayouts[2]}) {
            const Case c{2, 2, 150, 24, 20, l.key, l.value, true};
            const std::vector<Tensor> x = draw(c, p.dtype, 40, e.draw);
            const Tolerance tol = p.dtype == kFloat64 ? Tolerance{1e-11, 0, true} : scan_tolerance(p);
            expect_device_parity(scan_of(c, algorithm), x, tol, label(c, p, algorithm) + " " + e.name + pass);
          }
      }
    });
}

TEST(CudaGatedScan, StridedInputs) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (ScanAlgorithm algorithm : kAlgorithms)
    for_each_state_pass(algorithm, [&](const std::string& pass) {
      for (const Precision& p : kPrecisions) {
        if (p.tf32 && algorithm != ScanAlgorithm::Chunked) continue;
        const Tf32Setting mode(p.tf32);
        // The layers' layout: (B, T, H, d) transposed to (B, H, T, d), read in place.
        Generator gen(5);
        const std::vector<Tensor> x = {random_normal({2, 145, 3, 20}, p.dtype, 6),
                                       random_normal({2, 145, 3, 20}, p.dtype, 7),
                                       random_normal({2, 145, 3, 12}, p.dtype, 8),
                                       to(uniform({2, 145, 3, 12}, -1, -0.01, kFloat64, &gen), p.dtype)};
        expect_device_parity(
            [algorithm](const std::vector<Tensor>& t) {
              const Tensor o = gated_linear_scan(transpose(t[0], 1, 2), transpose(t[1], 1, 2), transpose(t[2], 1, 2),
                                                 Tensor(), transpose(t[3], 1, 2), Tensor(), algorithm);
              return o;
            },
            x, scan_tolerance(p),
            std::string("heads-last layout ") + algorithm_name(algorithm) + " " + p.name() + pass);
      }
    });
}

// The output comes out in v's memory order, each gradient in its input's: the layers' head merge
// after the scan is then a view.
TEST(CudaGatedScan, OutputsKeepTheInputsLayout) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor v = on_gpu(random_normal({2, 9, 3, 8}, kFloat32, 1)).requires_grad_(true);
  const Tensor q = on_gpu(random_normal({2, 3, 9, 8}, kFloat32, 2)).requires_grad_(true);
  const Tensor o = gated_linear_scan(q, q, transpose(v, 1, 2), Tensor(), Tensor());
  EXPECT_TRUE(transpose(o, 1, 2).is_contiguous());
  const auto g = grad(sum(o), {q, v});
  EXPECT_TRUE(g[1].is_contiguous());  // v's gradient, laid out like v
}

// 16k positions (256 chunks, the state carried through all of them): finite, and equal to the CPU.
// When one side decays the chained kernels' blocks are persistent, each taking chunk after chunk
// (cuda/kernels/chunked_scan_kernels.cuh: for_block_chunk). A GPU holds more blocks than the cases
// above have chunks, so here a launch may run only 1 or 3 of them: every block takes many chunks
// of several chains, in the order of its tickets, and reuses its shared tiles from chunk to chunk.
// Both sides decaying keeps a block a chunk, which the limit does not touch (the last layout).
TEST(CudaGatedScan, PersistentBlocksTakingManyChunksMatchCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  const ScanStatePassSetting chain(cuda::ScanStatePass::kChain);
  uint64_t seed = 700;
  for (const int blocks : {1, 3}) {
    const ScanPersistentBlocksSetting most(blocks);
    for (const Precision& p : kPrecisions) {
      const Tf32Setting mode(p.tf32);
      for (const Layout& l : {Layout{Decay::PerChannel, Decay::None}, Layout{Decay::None, Decay::PerChannel},
                              Layout{Decay::Scalar, Decay::None}, Layout{Decay::PerChannel, Decay::Scalar}})
        for (const Case& c :
             {Case{2, 3, 1000, 64, 64, l.key, l.value, true}, Case{1, 2, 300, 100, 48, l.key, l.value, false}})
          expect_device_parity(scan_of(c, ScanAlgorithm::Chunked), draw(c, p.dtype, seed += 10), scan_tolerance(p),
                               label(c, p, ScanAlgorithm::Chunked) + " chain, " + std::to_string(blocks) +
                                   " persistent blocks");
    }
  }
}

TEST(CudaGatedScan, LongSequence) {
  LINEA_SKIP_WITHOUT_CUDA();
  for_each_state_pass(ScanAlgorithm::Chunked, [&](const std::string& pass) {
    for (const Precision& p : {kPrecisions[1], kPrecisions[2]}) {
      const Tf32Setting mode(p.tf32);
      const Case c{1, 2, 16384, 64, 64, Decay::Scalar, Decay::PerChannel, false};
      const std::vector<Tensor> x = draw(c, kFloat32, 50, [](const Shape& s, Generator& gen) {
        return uniform(s, -0.05, 0.0, kFloat64, &gen);  // long memories: the state sums many steps
      });
      std::vector<Tensor> gx;
      for (const Tensor& e : x) gx.push_back(on_gpu(e).requires_grad_(true));
      const Tensor y = scan_of(c, ScanAlgorithm::Chunked)(gx);
      const auto g = grad(sum(y * y), gx);
      EXPECT_TRUE(std::isfinite(sum(to(y, kCPU)).item())) << p.name() << pass;
      for (const Tensor& e : g) EXPECT_TRUE(std::isfinite(sum(to(e, kCPU)).item())) << p.name() << pass;
      expect_device_parity(scan_of(c, ScanAlgorithm::Chunked), x, scan_tolerance(p),
                           label(c, p, ScanAlgorithm::Chunked) + pass);
    }
  });
}

// No atomics: partial sums over tiles (dk, dv > 64 here) are added in a fixed order, so two
// backward passes agree bit for bit.
TEST(CudaGatedScan, BackwardIsDeterministic) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (ScanAlgorithm algorithm : kAlgorithms)
    for_each_state_pass(algorithm, [&](const std::string& pass) {
      const Case c{1, 2, 200, 100, 130, Decay::Scalar, Decay::PerChannel, true};
      std::vector<Tensor> x;
      for (const Tensor& e : draw(c, kFloat32, 60)) x.push_back(on_gpu(e).requires_grad_(true));
      const DeviceFn f = scan_of(c, algorithm);
      const Tensor u = on_gpu(random_normal(f(x).shape(), kFloat32, 61));
      const auto first = grad(f(x), x, u);
      const auto second = grad(f(x), x, u);
      for (size_t i = 0; i < x.size(); ++i)
        EXPECT_TRUE(same_values(first[i], second[i])) << algorithm_name(algorithm) << pass << " input " << i;
    });
}

// A case's inputs on the GPU, for the tests that call the backend's kernels directly.
struct GpuScanInputs {
  Tensor q, k, v, gk, gv, s0;
};
GpuScanInputs gpu_inputs(const Case& c, DType dtype, uint64_t seed) {
  std::vector<Tensor> x;
  for (const Tensor& e : draw(c, dtype, seed)) x.push_back(on_gpu(e));
  GpuScanInputs in{x[0], x[1], x[2]};
  size_t next = 3;
  if (c.key != Decay::None) in.gk = x[next++];
  if (c.value != Decay::None) in.gv = x[next++];
  if (c.initial_state) in.s0 = x[next];
  return in;
}

// Calls f(c, p, inputs, label) for both cases shapes(layout) gives for each of `layouts`, in every
// precision and state pass, with c's inputs drawn from `seed` on the GPU (the tests below call the
// backend's chunked kernels directly).
template <class Shapes, class F>
void for_each_direct_case(std::initializer_list<Layout> layouts, const Shapes& shapes, uint64_t seed, const F& f) {
  for (const NamedScanStatePass& pass : kScanStatePasses)
    for (const Precision& p : kPrecisions)
      for (const Layout& l : layouts)
        for (const Case& c : shapes(l)) {
          const ScanStatePassSetting state_pass(pass.pass);
          const Tf32Setting mode(p.tf32);
          f(c, p, gpu_inputs(c, p.dtype, seed), label(c, p, ScanAlgorithm::Chunked) + " " + pass.name);
        }
}

// The chunked backward's gradients of q, k, v, gk, gv, s0 (undefined where the input is), from the
// forward's kept states, or recomputing them when `states` is undefined.
std::vector<Tensor> chunked_gradients(const Backend& kernels, const GpuScanInputs& in, const Tensor& dout, DType dtype,
                                      const Tensor& states) {
  std::vector<Tensor> g;
  for (const Tensor* input : {&in.q, &in.k, &in.v, &in.gk, &in.gv, &in.s0})
    g.push_back(input->defined() ? empty(input->shape(), dtype, gpu()) : Tensor());
  kernels.gated_scan_backward(in.q, in.k, in.v, in.gk, in.gv, in.s0, dout, Tensor(), g[0], g[1], g[2], g[3], g[4], g[5],
                              ScanAlgorithm::Chunked, states);
  return g;
}

// The chunked forward keeps the states before every chunk for its backward (when a gradient is to
// come); the backward reading them gives the gradients of the backward that recomputes them, bit
// for bit, in every precision and either state pass, over several chunks and 64-channel tiles.
TEST(CudaGatedScan, KeptStatesGiveTheRecomputedGradients) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Backend& gpu_kernels = backend_for(gpu());
  auto shapes = [](const Layout& l) {
    return std::array{Case{2, 2, 130, 64, 64, l.key, l.value, true}, Case{1, 3, 77, 100, 65, l.key, l.value, false}};
  };
  for_each_direct_case(
      {kLayouts[3], kLayouts[4], kLayouts[0]}, shapes, 80,
      [&](const Case& c, const Precision& p, const GpuScanInputs& in, const std::string& what) {
        const Tensor out = empty({c.batch, c.heads, c.steps, c.dv}, p.dtype, gpu());
        Tensor kept;
        gpu_kernels.gated_scan(in.q, in.k, in.v, in.gk, in.gv, in.s0, out, Tensor(), ScanAlgorithm::Chunked, &kept);
        ASSERT_TRUE(kept.defined()) << what;
        const Tensor dout = on_gpu(random_normal(out.shape(), p.dtype, 81));
        const std::vector<Tensor> from_kept = chunked_gradients(gpu_kernels, in, dout, p.dtype, kept);
        const std::vector<Tensor> recomputed = chunked_gradients(gpu_kernels, in, dout, p.dtype, Tensor());
        for (size_t i = 0; i < from_kept.size(); ++i)
          if (from_kept[i].defined()) EXPECT_TRUE(same_values(from_kept[i], recomputed[i])) << what << " input " << i;
      });
}

// The forward without a backward to come keeps no states: with the state passed between the
// chunks' blocks it goes through a ring of two slots per sequence instead. Either way the output
// and the final state are those of the forward that keeps them, bit for bit, over many chunks and
// several 64-channel tiles, with more blocks than the GPU holds at once.
TEST(CudaGatedScan, ForwardWithoutKeptStatesGivesTheSameResults) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Backend& gpu_kernels = backend_for(gpu());
  auto shapes = [](const Layout& l) {
    return std::array{Case{4, 8, 1000, 64, 64, l.key, l.value, true}, Case{1, 3, 333, 100, 130, l.key, l.value, false}};
  };
  for_each_direct_case(
      {kLayouts[2], kLayouts[3], kLayouts[4]}, shapes, 90,
      [&](const Case& c, const Precision& p, const GpuScanInputs& in, const std::string& what) {
        auto run = [&](bool keep) {
          const Tensor out = empty({c.batch, c.heads, c.steps, c.dv}, p.dtype, gpu());
          const Tensor final_state = empty({c.batch, c.heads, c.dv, c.dk}, p.dtype, gpu());
          Tensor kept;
          gpu_kernels.gated_scan(in.q, in.k, in.v, in.gk, in.gv, in.s0, out, final_state, ScanAlgorithm::Chunked,
                                 keep ? &kept : nullptr);
          return std::pair{out, final_state};
        };
        const auto [kept_out, kept_final] = run(true);
        const auto [ring_out, ring_final] = run(false);
        EXPECT_TRUE(same_values(kept_out, ring_out)) << what;
        EXPECT_TRUE(same_values(kept_final, ring_final)) << what;
      });
}

// The tensor cores' error is TF32 rounding: next to the float64 result, exact float32 is within
// float32 rounding and TF32 between 1e-5 and 5e-3 of the largest value. The lower bound fails if
// the products did not run on the tensor cores.
TEST(CudaGatedScan, Tf32DiffersFromExactByRoundingOnly) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (const Layout& l : {kLayouts[2], kLayouts[3], kLayouts[0]}) {
    const Case c{2, 2, 333, 64, 64, l.key, l.value, true};
    std::vector<std::string> names = {"out and state", "dq", "dk", "dv"};
    if (l.key != Decay::None) names.push_back("dgk");
    if (l.value != Decay::None) names.push_back("dgv");
    names.push_back("ds0");
    const std::vector<Tensor> x = draw(c, kFloat64, 70, [](const Shape& s, Generator& gen) {
      return uniform(s, -0.1, 0.0, kFloat64, &gen);  // the products below the diagonal matter
    });
    const DeviceFn f = scan_of(c, ScanAlgorithm::Chunked);
    const Tensor u = random_normal(f(x).shape(), kFloat64, 71);
    auto results_of = [&](const std::vector<Tensor>& in, const Tensor& cotangent) {
      std::vector<Tensor> leaves;
      for (const Tensor& e : in) leaves.push_back(clone(e).requires_grad_(true));
      const Tensor y = f(leaves);
      std::vector<Tensor> r = grad(y, leaves, cotangent);
      r.insert(r.begin(), detach(y));
      for (Tensor& e : r) e = to(to(e, kCPU), kFloat64);
      return r;
    };
    const std::vector<Tensor> truth = results_of(x, u);  // float64 on the CPU
    std::vector<Tensor> x32, x32_gpu;
    for (const Tensor& e : x) x32_gpu.push_back(on_gpu(to(e, kFloat32)));
    for (const NamedScanStatePass& pass : kScanStatePasses)
      for (bool tf32 : {false, true}) {
        const ScanStatePassSetting state_pass(pass.pass);
        const Tf32Setting mode(tf32);
        const std::vector<Tensor> r = results_of(x32_gpu, on_gpu(to(u, kFloat32)));
        for (size_t i = 0; i < r.size(); ++i) {
          const double relative = max_abs_diff(r[i], truth[i]) / max(abs(truth[i])).item();
          const std::string what = names[i] + ", " + pass.name;
          std::printf("[tf32] scan gk=%s gv=%s %s %s: %.2e of the largest value\n", decay_name(l.key).c_str(),
                      decay_name(l.value).c_str(), tf32 ? "TF32" : "exact", what.c_str(), relative);
          if (tf32) {
            EXPECT_LT(relative, 5e-3) << what;
            EXPECT_GT(relative, 1e-5) << what;
          } else {
            EXPECT_LT(relative, 1e-5) << what;
          }
        }
      }
  }
}

// TF32 rounds every operand to nearest, not by dropping its low bits (which is what the tensor
// cores do with a float32 operand left as it is). x = 1 + 2^-11 + 2^-13 rounds up to 1 + 2^-10,
// where dropping the bits gives 1 and exact float32 keeps x. With one position and every vector
// e_0 times 1 or x, o = (q.k) v, dv = (q.k) dout, dq = (dout.v) k and dk = (dout.v) q at
// channel 0: each is exactly the rounded x when x is one of its operands, and 1 when it is not.
TEST(CudaGatedScan, Tf32RoundsEveryOperandToNearest) {
  LINEA_SKIP_WITHOUT_CUDA();
  const double x = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -13), rounded = 1.0 + std::ldexp(1.0, -10);
  const char* names[] = {"q", "k", "v", "dout"};
  auto unit = [&](bool carries) {
    std::vector<float> e(8, 0.0f);
    e[0] = static_cast<float>(carries ? x : 1.0);
    return on_gpu(from_vector(e, {1, 1, 1, 8}));
  };
  for (const NamedScanStatePass& pass : kScanStatePasses)
    for (bool tf32 : {true, false})
      for (int carrier = 0; carrier < 4; ++carrier) {
        const ScanStatePassSetting state_pass(pass.pass);
        const Tf32Setting mode(tf32);
        std::vector<Tensor> in;
        for (int i = 0; i < 3; ++i) in.push_back(unit(carrier == i).requires_grad_(true));
        const Tensor o = gated_linear_scan(in[0], in[1], in[2], Tensor(), Tensor());
        const std::vector<Tensor> g = grad(o, in, unit(carrier == 3));
        // Which operands each result multiplies: o q k v, dq dout v k, dk dout v q, dv q k dout.
        const std::vector<std::pair<std::string, Tensor>> results = {
            {"o", o}, {"dq", g[0]}, {"dk", g[1]}, {"dv", g[2]}};
        const bool enters[4][4] = {{true, true, true, false}, {false, true, true, true}, {true, false, true, true},
                                   {true, true, false, true}};
        for (size_t r = 0; r < results.size(); ++r) {
          const double got = to(to(results[r].second, kCPU), kFloat64).to_vector<double>()[0];
          const double want = enters[r][carrier] ? (tf32 ? rounded : x) : 1.0;
          EXPECT_EQ(got, want) << results[r].first << " with x in " << names[carrier] << (tf32 ? ", TF32" : ", exact")
                               << ", " << pass.name;
        }
      }
}

TEST(CudaGatedScan, SequentialRejectsKeyDimAbove256) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor q = on_gpu(random_normal({1, 1, 4, 300}, kFloat32, 70));
  const Tensor v = on_gpu(random_normal({1, 1, 4, 8}, kFloat32, 71));
  EXPECT_LINEA_ERROR(gated_linear_scan(q, q, v, Tensor(), Tensor(), Tensor(), ScanAlgorithm::Sequential), "gated_scan",
                     "key dims up to 256, got dk = 300");
  // The chunked kernels cut any width into tiles.
  const Tensor o = gated_linear_scan(q, q, v, Tensor(), Tensor());
  EXPECT_TRUE(std::isfinite(sum(to(o, kCPU)).item()));
}

}  // namespace
}  // namespace linea::testing
