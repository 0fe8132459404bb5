// The basic layers against hand computations on the host, their parameters (names, counts,
// weight decay), state dicts, dtype conversion and train/eval behaviour.
#include <cmath>
#include <set>

#include "nn/layers/dropout.h"
#include "nn/layers/embedding.h"
#include "nn/layers/mlp.h"
#include "nn/layers/norm.h"
#include "tests/test_util.h"

namespace linea::nn {
namespace {

using testing::all_close;

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// Names of a module's parameters with their weight-decay flags, in registration order.
std::vector<std::pair<std::string, bool>> parameter_names(const Module& m) {
  std::vector<std::pair<std::string, bool>> out;
  for (const NamedParameter& p : m.named_parameters()) out.emplace_back(p.name, p.weight_decay);
  return out;
}

// y = x W^T + b over the rows of x, written as loops.
std::vector<double> linear_by_hand(const std::vector<double>& x, const Tensor& weight, const Tensor& bias) {
  const int64_t out = weight.size(0), in = weight.size(1), rows = static_cast<int64_t>(x.size()) / in;
  const std::vector<double> w = values(weight), b = bias.defined() ? values(bias) : std::vector<double>(out, 0.0);
  std::vector<double> y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b[o];
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
      y[r * out + o] = s;
    }
  return y;
}

double gelu_by_hand(double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }
double silu_by_hand(double v) { return v / (1.0 + std::exp(-v)); }

TEST(Linear, MatchesLoopsOverLeadingDims) {
  Generator gen(1);
  Linear lin(4, 5, gen);
  const Tensor x = randn({2, 3, 4}, {}, &gen);
  const Tensor y = lin.forward(x);
  EXPECT_EQ(y.shape(), Shape({2, 3, 5}));
  EXPECT_TRUE(all_close(y, from_vector(linear_by_hand(values(x), lin.weight, lin.bias), {2, 3, 5}), 1e-5, 1e-6));
  EXPECT_EQ(lin.forward(randn({4}, {}, &gen)).shape(), Shape({5}));
  EXPECT_LINEA_ERROR(lin.forward(randn({2, 3}, {}, &gen)), "Linear", "(..., 4)", "[2, 3]");
}

// y = x @ t(W): W's gradient is formed in W's own layout (no transposed view to copy), and equals
// the sum over rows of dy^T x.
TEST(Linear, WeightGradientArrivesContiguous) {
  Generator gen(2);
  Linear lin(4, 5, gen, {.bias = false});
  const Tensor x = randn({2, 3, 4}, kFloat64, &gen), u = randn({2, 3, 5}, kFloat64, &gen);
  lin.to(kFloat64);
  const Tensor gw = grad(lin.forward(x), {lin.weight}, u)[0];
  EXPECT_TRUE(gw.is_contiguous());
  EXPECT_TRUE(all_close(gw, matmul(t(reshape(u, {6, 5})), reshape(x, {6, 4})), 1e-12, 1e-12));
}

TEST(Linear, ParametersAndInitialisers) {
  Generator gen(2);
  Linear lin(64, 32, gen);
  EXPECT_EQ(parameter_names(lin), (std::vector<std::pair<std::string, bool>>{{"weight", true}, {"bias", false}}));
  EXPECT_EQ(lin.num_parameters(), 64 * 32 + 32);
  EXPECT_EQ(lin.weight.shape(), Shape({32, 64}));
  const double bound = 1.0 / 8.0;  // PyTorch's default: U(-1/sqrt(in), 1/sqrt(in)) for W and b
  for (const Tensor& p : {lin.weight, lin.bias}) {
    EXPECT_LE(max(p).item(), bound);
    EXPECT_GE(min(p).item(), -bound);
    EXPECT_GT(max(p).item(), 0.8 * bound);  // spread over the whole range
  }
  Linear plain(512, 256, gen, {.bias = false, .init = LinearInit::Normal});
  EXPECT_EQ(parameter_names(plain).size(), 1u);
  EXPECT_FALSE(plain.has_bias());
  const double std_dev = std::sqrt(var(plain.weight).item());
  EXPECT_NEAR(std_dev, 0.02, 0.001);
  Linear lecun(400, 300, gen, {.init = LinearInit::LeCunNormal});
  EXPECT_NEAR(std::sqrt(var(lecun.weight).item()), 0.05, 0.002);
  EXPECT_EQ(max(abs(lecun.bias)).item(), 0.0);
  Linear xavier(100, 200, gen, {.init = LinearInit::XavierUniform});
  EXPECT_LE(max(abs(xavier.weight)).item(), std::sqrt(6.0 / 300.0) + 1e-7);
  EXPECT_LINEA_ERROR(Linear(0, 3, gen), "in_features must be positive");
}

TEST(Linear, SameSeedSameWeights) {
  Generator a(9), b(9);
  EXPECT_EQ(max_abs_diff(Linear(8, 4, a).weight, Linear(8, 4, b).weight), 0.0);
}

TEST(Embedding, LooksUpRows) {
  Generator gen(3);
  Embedding emb(10, 4, gen);
  const Tensor ids = from_vector(std::vector<int64_t>{3, 0, 9, 3, 7, 1}, {2, 3});
  const Tensor y = emb.forward(ids);
  EXPECT_EQ(y.shape(), Shape({2, 3, 4}));
  const std::vector<double> w = values(emb.weight), got = values(y);
  const std::vector<int64_t> id = ids.to_vector<int64_t>();
  for (size_t n = 0; n < id.size(); ++n)
    for (size_t d = 0; d < 4; ++d) EXPECT_EQ(got[n * 4 + d], w[id[n] * 4 + d]);
  EXPECT_EQ(parameter_names(emb), (std::vector<std::pair<std::string, bool>>{{"weight", false}}));
  EXPECT_LINEA_ERROR(emb.forward(from_vector(std::vector<int64_t>{10}, {1})), "index 10 is out of range");
  EXPECT_LINEA_ERROR(emb.forward(zeros({2})), "Embedding", "int64 token ids");
  Embedding big(1000, 100, gen);
  EXPECT_NEAR(std::sqrt(var(big.weight).item()), 0.02, 0.0005);
}

// Sets a parameter to distinct values, so a test sees a gain or shift that is not 1 or 0.
void fill_distinct(Tensor& p, double start, double step) {
  NoGradGuard no_grad;
  copy_(p, arange(start, start + step * static_cast<double>(p.numel()) - step / 2, step, kFloat64));
}

// Per row of n values: (x - mean) / sqrt(var + eps) * w + b (layer) or x / sqrt(mean(x^2) + eps) * w (rms).
std::vector<double> norm_by_hand(const std::vector<double>& x, int64_t n, bool layer, double eps,
                                 const std::vector<double>& w, const std::vector<double>& b) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) {
    double mean = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i) mean += x[r * n + i] / n;
    if (!layer) mean = 0;
    for (int64_t i = 0; i < n; ++i) sq += (x[r * n + i] - mean) * (x[r * n + i] - mean) / n;
    for (int64_t i = 0; i < n; ++i)
      y[r * n + i] = (x[r * n + i] - mean) / std::sqrt(sq + eps) * (w.empty() ? 1.0 : w[i % w.size()]) +
                     (b.empty() ? 0.0 : b[i % b.size()]);
  }
  return y;
}

TEST(Norms, LayerNormAndRMSNormMatchHandComputation) {
  Generator gen(4);
  const Tensor x = randn({3, 2, 6}, kFloat64, &gen) * 3.0 + 1.0;
  LayerNorm ln(6, 1e-5);
  ln.to(kFloat64);
  fill_distinct(ln.weight, 0.5, 0.25);
  fill_distinct(ln.bias, -1.0, 0.3);
  EXPECT_TRUE(all_close(ln.forward(x), from_vector(norm_by_hand(values(x), 6, true, 1e-5, values(ln.weight), values(ln.bias)), x.shape()), 1e-10, 1e-12));
  RMSNorm rms(6, 1e-6);
  rms.to(kFloat64);
  fill_distinct(rms.weight, 0.5, 0.25);
  EXPECT_TRUE(all_close(rms.forward(x), from_vector(norm_by_hand(values(x), 6, false, 1e-6, values(rms.weight), {}), x.shape()), 1e-10, 1e-12));

  EXPECT_EQ(parameter_names(ln), (std::vector<std::pair<std::string, bool>>{{"weight", false}, {"bias", false}}));
  EXPECT_EQ(parameter_names(rms), (std::vector<std::pair<std::string, bool>>{{"weight", false}}));
  EXPECT_EQ(LayerNorm(6, 1e-5, false).num_parameters(), 0);
  EXPECT_EQ(RMSNorm(6, 1e-6, false).num_parameters(), 0);
  EXPECT_TRUE(all_close(LayerNorm(6, 1e-5, false).forward(x), from_vector(norm_by_hand(values(x), 6, true, 1e-5, {}, {}), x.shape()), 1e-10, 1e-12));
  EXPECT_LINEA_ERROR(LayerNorm(6, 1e-5, false).forward(randn({2, 5})), "LayerNorm", "(..., 6)");
  EXPECT_LINEA_ERROR(RMSNorm(6).forward(randn({2, 5})), "RMSNorm", "(..., 6)");
  EXPECT_LINEA_ERROR(RMSNorm(6, -1.0), "eps must be non-negative");
}

TEST(HeadNorm, NormalizesEachHeadOnItsOwn) {
  Generator gen(5);
  const int64_t B = 2, T = 3, H = 3, dh = 4;
  const Tensor x = randn({B, T, H, dh}, kFloat64, &gen) * 2.0;
  struct Variant {
    NormKind kind;
    HeadNormWeight weight;
    int64_t size;
  };
  for (const Variant v : {Variant{NormKind::RMS, HeadNormWeight::Shared, dh},
                          Variant{NormKind::Layer, HeadNormWeight::Shared, dh},
                          Variant{NormKind::RMS, HeadNormWeight::PerChannel, H * dh},
                          Variant{NormKind::Layer, HeadNormWeight::PerChannel, H * dh}}) {
    const bool layer = v.kind == NormKind::Layer;
    HeadNorm norm(H, dh, {.kind = v.kind, .weight = v.weight, .eps = 1e-5});
    norm.to(kFloat64);
    ASSERT_EQ(norm.weight.shape(), Shape({v.size}));
    EXPECT_EQ(norm.bias.defined(), layer);
    fill_distinct(norm.weight, 0.5, 0.1);
    if (layer) fill_distinct(norm.bias, -0.3, 0.05);
    // Per row of dh values; a per-channel parameter is indexed by (head, channel), i.e. by the
    // position within the (H * dh) block, which norm_by_hand's i % size gives when rows are heads.
    std::vector<double> expected;
    const std::vector<double> xs = values(x), w = values(norm.weight), b = layer ? values(norm.bias) : std::vector<double>{};
    for (int64_t bt = 0; bt < B * T; ++bt) {
      const std::vector<double> block(xs.begin() + bt * H * dh, xs.begin() + (bt + 1) * H * dh);
      // Normalize each head's dh values, then apply the block-wide parameters.
      std::vector<double> normalized;
      for (int64_t h = 0; h < H; ++h) {
        const std::vector<double> head(block.begin() + h * dh, block.begin() + (h + 1) * dh);
        for (double e : norm_by_hand(head, dh, layer, 1e-5, {}, {})) normalized.push_back(e);
      }
      for (int64_t i = 0; i < H * dh; ++i)
        expected.push_back(normalized[i] * w[i % w.size()] + (layer ? b[i % b.size()] : 0.0));
    }
    const Tensor y = norm.forward(x);
    EXPECT_TRUE(all_close(y, from_vector(expected, x.shape()), 1e-10, 1e-12));
    // Decoding shape (B, H, dh): one time step of the same module gives that step's rows.
    EXPECT_TRUE(all_close(norm.forward(select(x, 1, 2)), select(y, 1, 2), 1e-12, 1e-14));
  }
  HeadNorm none(H, dh, {.weight = HeadNormWeight::None});
  EXPECT_EQ(none.num_parameters(), 0);
  EXPECT_LINEA_ERROR(none.forward(randn({2, 4, 4})), "HeadNorm", "3 heads");
  EXPECT_LINEA_ERROR(none.forward(randn({2, 3, 5})), "HeadNorm", "(..., 4)");
  EXPECT_EQ(parameter_names(HeadNorm(H, dh, {.kind = NormKind::Layer})),
            (std::vector<std::pair<std::string, bool>>{{"weight", false}, {"bias", false}}));
}

TEST(Dropout, TrainingMasksAndScalesEvalIsIdentity) {
  auto gen = std::make_shared<Generator>(17);
  Dropout drop(0.25, gen);
  const Tensor x = ones({100, 100});
  const std::vector<double> y = values(drop.forward(x));
  int64_t zeros_seen = 0;
  for (double v : y) {
    EXPECT_TRUE(v == 0.0 || std::abs(v - 1.0 / 0.75) < 1e-6) << v;
    zeros_seen += v == 0.0;
  }
  EXPECT_NEAR(static_cast<double>(zeros_seen) / 10000.0, 0.25, 0.02);
  // The same seed gives the same mask; the stream moves on between calls.
  gen->manual_seed(17);
  EXPECT_EQ(values(drop.forward(x)), y);
  EXPECT_NE(values(drop.forward(x)), y);
  drop.eval();
  EXPECT_EQ(values(drop.forward(x)), values(x));
  drop.train();
  EXPECT_NE(values(drop.forward(x)), values(x));
  EXPECT_EQ(Dropout(0.0).forward(x).to_vector<double>(), values(x));
  EXPECT_LINEA_ERROR(Dropout(1.0), "p must be in [0, 1)");
  EXPECT_LINEA_ERROR(Dropout(-0.1), "p must be in [0, 1)");
}

TEST(MLP, MatchesHandComputation) {
  Generator gen(6);
  MLP mlp(3, 7, gen);
  const Tensor x = randn({2, 2, 3}, {}, &gen);
  std::vector<double> h = linear_by_hand(values(x), mlp.fc1->weight, mlp.fc1->bias);
  for (double& v : h) v = gelu_by_hand(v);
  const std::vector<double> expected = linear_by_hand(h, mlp.fc2->weight, mlp.fc2->bias);
  EXPECT_TRUE(all_close(mlp.forward(x), from_vector(expected, {2, 2, 3}), 1e-5, 1e-6));
  EXPECT_EQ(parameter_names(mlp), (std::vector<std::pair<std::string, bool>>{
                                      {"fc1.weight", true}, {"fc1.bias", false}, {"fc2.weight", true}, {"fc2.bias", false}}));
  EXPECT_EQ(mlp.num_parameters(), 3 * 7 + 7 + 7 * 3 + 3);
}

TEST(GatedMLP, SwiGLUAndGriffinGeGLUMatchHandComputation) {
  Generator gen(7);
  const int64_t D = 4;
  GatedMLP swiglu(D, 5, gen, {.activation = Activation::Silu, .bias = false});
  const Tensor x = randn({3, D}, {}, &gen);
  std::vector<double> g = linear_by_hand(values(x), swiglu.gate->weight, Tensor());
  const std::vector<double> u = linear_by_hand(values(x), swiglu.up->weight, Tensor());
  for (size_t i = 0; i < g.size(); ++i) g[i] = silu_by_hand(g[i]) * u[i];
  EXPECT_TRUE(all_close(swiglu.forward(x), from_vector(linear_by_hand(g, swiglu.down->weight, Tensor()), {3, D}), 1e-5, 1e-6));
  EXPECT_EQ(parameter_names(swiglu), (std::vector<std::pair<std::string, bool>>{
                                         {"gate.weight", true}, {"up.weight", true}, {"down.weight", true}}));
  // Griffin: two branches of width 3D.
  GatedMLP griffin(D, 3 * D, gen, {.activation = Activation::GeluTanh});
  EXPECT_EQ(griffin.gate->out_features(), 3 * D);
  EXPECT_EQ(griffin.num_parameters(), 2 * (D * 3 * D + 3 * D) + 3 * D * D + D);
  const Tensor gx = griffin.forward(x);
  const Tensor expected = griffin.down->forward(gelu(griffin.gate->forward(x), GeluApprox::Tanh) * griffin.up->forward(x));
  EXPECT_TRUE(all_close(gx, expected, 1e-6, 1e-7));
}

// A model-like tree: an embedding and a list of blocks at numbered positions.
struct Block : Module {
  explicit Block(Generator& gen) {
    norm = register_module("norm", std::make_shared<RMSNorm>(4));
    mlp = register_module("mlp", std::make_shared<GatedMLP>(4, 6, gen));
    drop = register_module("drop", std::make_shared<Dropout>(0.5));
  }
  Tensor forward(const Tensor& x) const { return x + drop->forward(mlp->forward(norm->forward(x))); }
  std::shared_ptr<RMSNorm> norm;
  std::shared_ptr<GatedMLP> mlp;
  std::shared_ptr<Dropout> drop;
};

struct Blocks : Module {
  Blocks(int n, Generator& gen) {
    for (int i = 0; i < n; ++i) list.push_back(register_module(std::to_string(i), std::make_shared<Block>(gen)));
  }
  std::vector<std::shared_ptr<Block>> list;
};

struct Model : Module {
  explicit Model(uint64_t seed) : gen(seed) {
    embed = register_module("embed", std::make_shared<Embedding>(11, 4, gen));
    blocks = register_module("blocks", std::make_shared<Blocks>(4, gen));
  }
  Tensor forward(const Tensor& ids) const {
    Tensor h = embed->forward(ids);
    for (const auto& block : blocks->list) h = block->forward(h);
    return h;
  }
  Generator gen;
  std::shared_ptr<Embedding> embed;
  std::shared_ptr<Blocks> blocks;
};

const Tensor& sample_ids() {
  static const Tensor ids = from_vector(std::vector<int64_t>{1, 5, 10, 0, 3, 3}, {2, 3});
  return ids;
}

TEST(ModuleTree, HierarchicalNames) {
  Model m(1);
  std::set<std::string> names;
  for (const NamedParameter& p : m.named_parameters()) names.insert(p.name);
  for (const char* name : {"embed.weight", "blocks.0.norm.weight", "blocks.3.mlp.gate.weight", "blocks.3.mlp.down.bias"})
    EXPECT_TRUE(names.count(name)) << name;
  EXPECT_EQ(names.size(), 1u + 4u * 7u);
  EXPECT_EQ(m.named_parameters().front().name, "embed.weight");
  EXPECT_EQ(m.num_parameters(), 11 * 4 + 4 * (4 + 3 * (4 * 6) + 2 * 6 + 4));
  // parameters() skips the names but keeps their order.
  const std::vector<NamedParameter> named = m.named_parameters();
  const std::vector<Tensor> plain = m.parameters();
  ASSERT_EQ(plain.size(), named.size());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(plain[i].impl_ptr(), named[i].tensor.impl_ptr()) << named[i].name;
}

TEST(ModuleTree, StateDictRoundTripsIntoAFreshModule) {
  Model a(1), b(2);
  a.eval();
  b.eval();
  EXPECT_GT(max_abs_diff(a.forward(sample_ids()), b.forward(sample_ids())), 1e-3);
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(max_abs_diff(a.forward(sample_ids()), b.forward(sample_ids())), 0.0);
  // Loaded by value: changing a afterwards leaves b alone.
  {
    NoGradGuard no_grad;
    add_(a.blocks->list[1]->mlp->up->weight, ones({6, 4}));
  }
  EXPECT_GT(max_abs_diff(a.forward(sample_ids()), b.forward(sample_ids())), 1e-3);
}

TEST(ModuleTree, LoadStateDictNamesWhatIsWrong) {
  Model a(1), b(2);
  StateDict missing = a.state_dict();
  missing.erase("blocks.2.mlp.down.bias");
  EXPECT_LINEA_ERROR(b.load_state_dict(missing), "missing entry 'blocks.2.mlp.down.bias'");
  b.load_state_dict(missing, /*strict=*/false);
  EXPECT_EQ(max_abs_diff(a.blocks->list[2]->mlp->gate->weight, b.blocks->list[2]->mlp->gate->weight), 0.0);

  StateDict extra = a.state_dict();
  extra["blocks.9.mlp.gate.weight"] = zeros({6, 4});
  EXPECT_LINEA_ERROR(b.load_state_dict(extra), "unexpected entry 'blocks.9.mlp.gate.weight'");

  StateDict misshaped = a.state_dict();
  misshaped["embed.weight"] = zeros({12, 4});
  EXPECT_LINEA_ERROR(b.load_state_dict(misshaped), "'embed.weight'", "[12, 4]", "[11, 4]");
  EXPECT_LINEA_ERROR(b.load_state_dict(misshaped, /*strict=*/false), "'embed.weight'");
}

TEST(ModuleTree, ToFloat64KeepsTrainabilityAndValues) {
  Model m(3);
  m.eval();
  const Tensor before = m.forward(sample_ids());
  m.to(kFloat64);
  for (const NamedParameter& p : m.named_parameters()) {
    EXPECT_EQ(p.tensor.dtype(), kFloat64) << p.name;
    EXPECT_TRUE(p.tensor.requires_grad()) << p.name;
    EXPECT_TRUE(p.tensor.is_leaf()) << p.name;
  }
  const Tensor after = m.forward(sample_ids());
  EXPECT_EQ(after.dtype(), kFloat64);
  EXPECT_TRUE(all_close(after, before, 1e-5, 1e-5));
}

TEST(ModuleTree, TrainAndEvalReachEveryDropout) {
  Model m(4);
  EXPECT_TRUE(m.blocks->list[3]->drop->is_training());
  m.eval();
  EXPECT_FALSE(m.blocks->list[3]->drop->is_training());
  EXPECT_EQ(max_abs_diff(m.forward(sample_ids()), m.forward(sample_ids())), 0.0);
  m.train();
  EXPECT_TRUE(m.blocks->list[3]->drop->is_training());
  EXPECT_GT(max_abs_diff(m.forward(sample_ids()), m.forward(sample_ids())), 0.0);
}

TEST(ModuleTree, SwapParametersExchangesTheTensorsThemselves) {
  Generator gen(6);
  Linear lin(3, 2, gen);
  const Tensor w = lin.weight, b = lin.bias;
  std::vector<Tensor> other = {zeros({2, 3}), ones({2})};
  lin.swap_parameters(other);
  EXPECT_EQ(lin.forward(ones({3})).to_vector<double>(), (std::vector<double>{1.0, 1.0}));
  EXPECT_TRUE(other[0].is_same(w) && other[1].is_same(b));
  lin.swap_parameters(other);
  EXPECT_TRUE(lin.weight.is_same(w));
  std::vector<Tensor> too_few = {zeros({2, 3})};
  EXPECT_LINEA_ERROR(lin.swap_parameters(too_few), "swap_parameters", "1 tensors for 2 parameters");
  std::vector<Tensor> misshaped = {zeros({3, 2}), zeros({2})};
  EXPECT_LINEA_ERROR(lin.swap_parameters(misshaped), "parameter 'weight'", "[2, 3]", "[3, 2]");
  EXPECT_TRUE(lin.weight.is_same(w));  // a refused swap changes nothing
}

TEST(ModuleTree, BackwardReachesEveryParameter) {
  Model m(5);
  backward(sum(square(m.forward(sample_ids()))));
  for (const NamedParameter& p : m.named_parameters()) {
    ASSERT_TRUE(p.tensor.grad().defined()) << p.name;
    EXPECT_EQ(p.tensor.grad().shape(), p.tensor.shape()) << p.name;
  }
  m.zero_grad();
  EXPECT_FALSE(m.named_parameters()[0].tensor.grad().defined());
}

}  // namespace
}  // namespace linea::nn
