// `linea bench decode`: generation speed of the standard LM, one layer letter at a time (softmax S,
// ReGLA R and Fast Decay F, the ReGLA paper's Figure 5, and GLA G). For each context length:
//   prefill    the time to process a prompt of that length in one pass (LanguageModel::prefill),
//              beside the training forward over the same tokens (the goal: prefill at
//              least as fast), and with --compare-steps the prompt fed token by token, as
//              `linea generate` did before prefill existed; on CUDA also prefill_host_ms and
//              forward_host_ms, the host's time to queue each (no wait for the GPU): where it is
//              about the whole time, the host sets the pace, not the GPU;
//   decode     tokens/s continuing from that context at each batch size (the prompt's state
//              stacked once per row); on CUDA also decode_b<batch>_graph: the step replayed
//              from a CUDA graph together with the greedy draw (train/decode_graph.h),
//              with the number of operations the graph holds (decode_b<batch>_graph_nodes)
//              and the graph alone, replayed without the copies of the ids to the host
//              (decode_b<batch>_graph_replay_ms_per_step);
// each with its peak memory, and the size of the decoding state at batch 1 (flat in the context
// for the recurrent letters, growing for softmax's KV cache). One JSON line per letter and context.
//
// Standard shape (the GPU anchor's, ../shared/bench/decode_graph_bench.py): V=8192, D=512, 6
// layers, 8 heads of 64, MLP 2048 (GELU tanh), RMSNorm, tied embeddings, random weights, float32.
// Decoding times the path of `linea generate`: step(), the next token drawn on the device
// (greedy: the sampler is not what is measured) and fed to the next step there, each step's ids
// copied to the host beside the device's stream and read after the next step is queued (train/generate.cpp);
// on CUDA both eagerly (every kernel queued by the host) and replayed from a CUDA graph
// (train/decode_graph.h), which is what generate uses where the model allows.
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/memory.h"
#include "nn/model.h"
#include "tensor/host_copy.h"
#include "train/decode_graph.h"
#include "tools/bench_util.h"
#include "tools/commands.h"
#include "tools/flags.h"

namespace linea::cli {

namespace {

struct Config : bench::TimingOptions {
  Config() { repeats = 3; }  // a context of 8k tokens takes long enough per run
  std::string device = "cpu";
  bench::ListFlag letters{"S,R,F,G"};
  bench::ListFlag contexts{"512,2048,8192"};
  bench::ListFlag batches{"1,16"};
  std::vector<int64_t> batch_sizes;  // --batches parsed
  bench::LmSize size{.vocab = 8192, .d_model = 512, .layers = 6, .heads = 8};
  int64_t mlp_hidden = 2048;
  int64_t decode_tokens = 32;
  bool compare_steps = false;
  int warmup = 1;
};

double mib(double bytes) { return bytes / (1 << 20); }

// The bytes a decoding state holds (every layer's tensors).
double state_bytes(const nn::LanguageModel::State& state) {
  double bytes = 0;
  for (const auto& layer : state.layers)
    for (const auto& [name, tensor] : layer->tensors())
      if (tensor.defined()) bytes += static_cast<double>(tensor.numel() * dtype_size(tensor.dtype()));
  return bytes;
}

class DecodeBench {
 public:
  DecodeBench(const Config& c, char letter, Device device) : c_(c), device_(device), model_(config(c, letter), gen_) {
    model_.to(device);
    model_.eval();
  }

  bench::JsonLine measure(int64_t context) {
    NoGradGuard no_grad;
    const Tensor ids = randint(0, c_.size.vocab, {1, context}, device_, &gen_);
    bench::JsonLine line;
    line.add("bench", "decode").add("letter", std::string(1, model_.config().pattern[0]));
    line.add("layer", nn::layer_kind(model_.config().pattern[0]).name).add("device", device_.str());
    line.add("params", model_.num_parameters());
    bench::add_lm_size(line, c_.size).add("mlp", c_.mlp_hidden).add("context", context);
    if (device_.is_cpu()) line.add("threads", c_.threads);

    nn::LanguageModel::State prompt_state;
    Tensor logits;
    auto prefill = [&] {
      prompt_state = model_.init_state(1);  // the last run's state freed first
      logits = model_.prefill(ids, prompt_state);
      sync();
    };
    auto forward = [&] { model_.forward(ids); };
    auto forward_synced = [&] {
      forward();
      sync();
    };
    // Call by call in alternation: a short prompt is bound by the host, whose speed drifts, and
    // timing all of one before all of the other would hand the drift to one side of the ratio.
    const auto [prefill_ms, forward_ms] = bench::median_ms_pair(c_.repeats, prefill, forward_synced, c_.warmup);
    add_timing(line, "prefill", context, prefill_ms, prefill);
    add_timing(line, "forward", context, forward_ms, forward_synced);
    if (device_.is_cuda()) {
      line.add("prefill_host_ms", host_ms([&] {
        prompt_state = model_.init_state(1);
        logits = model_.prefill(ids, prompt_state);
      }));
      line.add("forward_host_ms", host_ms(forward));
    }
    if (c_.compare_steps) {  // one run: at long contexts it takes as long as generating the prompt
      const double ms = bench::median_ms(1, [&] {
        nn::LanguageModel::State state = model_.init_state(1);
        for (int64_t t = 0; t < context; ++t) model_.step(select(ids, 1, t), state);
        sync();
      }, 0);
      line.add("prompt_steps_ms", ms).add("prefill_speedup", ms / prefill_ms);
    }
    model_.reserve(prompt_state, context);  // a KV cache sized for the prompt alone, as its state's size
    line.add("state_mib", mib(state_bytes(prompt_state)));
    for (int64_t batch : c_.batch_sizes) {
      decode(line, batch, prompt_state, logits, /*graphed=*/false);
      if (device_.is_cuda()) decode(line, batch, prompt_state, logits, /*graphed=*/true);
    }
    return line;
  }

 private:
  static nn::ModelConfig config(const Config& c, char letter) {
    nn::ModelConfig mc = bench::lm_config(c.size, letter);
    mc.mlp_hidden = c.mlp_hidden;
    return mc;
  }

  void sync() const {
    if (device_.is_cuda()) cuda::synchronize(device_.index);
  }

  // The host's median time to queue fn's work, the device drained before each run and after the
  // last.
  double host_ms(const std::function<void()>& fn) {
    const double ms = bench::median_ms_with_setup(c_.repeats, [&] { sync(); }, fn, c_.warmup);
    sync();
    return ms;
  }

  // <what>_ms and <what>_tok_s for `tokens` tokens from a time measured already, and
  // <what>_peak_mib over one more run of fn.
  void add_timing(bench::JsonLine& line, const std::string& what, int64_t tokens, double ms,
                  const std::function<void()>& fn) {
    line.add(what + "_ms", ms).add(what + "_tok_s", static_cast<double>(tokens) / ms * 1e3);
    bench::reset_peak_memory(device_);
    fn();
    line.add(what + "_peak_mib", bench::peak_memory_mib(device_));
  }

  // decode_b<batch>[_graph]_tok_s, _ms_per_step and _peak_mib: decode_tokens greedy steps of
  // `batch` rows, each continuing the prompt's state (stacked afresh before every run, untimed):
  // eagerly, or `graphed` (CUDA) replayed from a CUDA graph (train/decode_graph.h) where the
  // model's state allows one; where it does not, decode_b<batch>_graph says why.
  void decode(bench::JsonLine& line, int64_t batch, const nn::LanguageModel::State& prompt_state,
              const Tensor& prompt_logits, bool graphed) {
    const std::string key = "decode_b" + std::to_string(batch) + (graphed ? "_graph" : "");
    const std::vector<const nn::LanguageModel::State*> rows(static_cast<size_t>(batch), &prompt_state);
    const Tensor first_logits = cat(std::vector<Tensor>(static_cast<size_t>(batch), prompt_logits), 0);
    nn::LanguageModel::State state;
    std::unique_ptr<train::DecodeGraph> graph;
    std::string why_not;
    auto setup = [&] {
      graph.reset();
      state = nn::LanguageModel::State{};
      state = model_.stack_states(rows);
      model_.reserve(state, prompt_state.position + c_.decode_tokens + 1);  // as generate() does
      if (graphed) graph = train::DecodeGraph::capture(model_, state, batch, device_, &why_not, kGreedy);
      sync();
    };
    if (graphed) {
      setup();
      if (!graph) {
        line.add(key, why_not);
        return;
      }
    }
    if (graph) line.add(key + "_nodes", static_cast<int64_t>(graph->node_count()));
    const Tensor u = zeros({batch}, {kFloat64, device_});  // greedy draws do not read it
    HostCopy to_host(static_cast<size_t>(batch) * sizeof(int64_t), device_, HostCopy::Stream::Beside);
    // As generate() does: each step's ids drawn on the device and fed to the next step there,
    // their copy to the host read once the next step is queued.
    auto run = [&] {
      Tensor ids = sample_tokens(first_logits, u, kGreedy);
      for (int64_t i = 0; i < c_.decode_tokens; ++i) {
        to_host.start(ids);
        ids = graph ? graph->step_and_draw(ids, u) : sample_tokens(model_.step(ids, state), u, kGreedy);
        to_host.wait();
      }
      to(ids, kCPU);
    };
    bench::reset_peak_memory(device_);
    const double ms = bench::median_ms_with_setup(c_.repeats, setup, run, c_.warmup);
    line.add(key + "_tok_s", static_cast<double>(batch * c_.decode_tokens) / ms * 1e3);
    line.add(key + "_ms_per_step", ms / static_cast<double>(c_.decode_tokens));
    line.add(key + "_peak_mib", bench::peak_memory_mib(device_));
    if (graph) {
      // The graph alone, replayed back to back without the copies to the host: the floor of the
      // loop above.
      const double replay_ms = bench::median_ms_with_setup(c_.repeats, setup, [&] {
        Tensor ids = zeros({batch}, {kInt64, device_});
        for (int64_t i = 0; i < c_.decode_tokens; ++i) ids = graph->step_and_draw(ids, u);
        sync();
      }, c_.warmup);
      line.add(key + "_replay_ms_per_step", replay_ms / static_cast<double>(c_.decode_tokens));
    }
  }

  static constexpr SamplingParams kGreedy{.temperature = 0};  // the sampler is not what is measured

  const Config& c_;
  Device device_;
  Generator gen_{0};
  nn::LanguageModel model_;
};

int run(const std::string& program, std::span<const std::string> args) {
  Config c;
  Flags flags(program,
              "Times prompt processing (prefill) and decoding of the standard LM for each layer letter and "
              "context length, with peak memory (JSON lines).");
  flags.add("device", &c.device, "cpu, cuda or cuda:N");
  c.letters.add_to(flags, "letters", "comma-separated layer letters, each a model of --layers such layers");
  c.contexts.add_to(flags, "contexts", "comma-separated prompt lengths decoding continues from");
  c.batches.add_to(flags, "batches", "comma-separated batch sizes of the decode measurement");
  flags.add("decode-tokens", &c.decode_tokens, "decode steps timed per run");
  bench::add_lm_size_flags(flags, c.size, {.heads = "heads (head dim: d-model / heads)"});
  flags.add("mlp-hidden", &c.mlp_hidden, "hidden width of the MLP (GELU tanh)");
  flags.add("compare-steps", &c.compare_steps, "also time the prompt fed token by token through step() (one run)");
  flags.add("warmup", &c.warmup, "untimed runs before each measurement");
  bench::add_timing_flags(flags, c);
  if (!bench::parse(flags, args, c)) return 0;
  if (c.warmup < 0) flags.fail("--warmup must be >= 0");
  const bench::LmSize& size = c.size;
  if (size.d_model % std::max<int64_t>(size.heads, 1) != 0) flags.fail("--heads must divide --d-model");
  for (const auto& [name, value] : {std::pair{"decode-tokens", c.decode_tokens}, {"vocab", size.vocab},
                                    {"d-model", size.d_model}, {"layers", size.layers}, {"heads", size.heads},
                                    {"mlp-hidden", c.mlp_hidden}})
    if (value < 1) flags.fail(std::string("--") + name + " must be at least 1");
  const std::vector<int64_t> contexts = c.contexts.positive_numbers(flags);
  c.batch_sizes = c.batches.positive_numbers(flags);
  std::vector<char> letters;
  for (const std::string& item : c.letters.items()) {
    if (item.size() != 1) c.letters.fail(flags, "single layer letters separated by commas", c.letters.text());
    nn::layer_kind(item[0]);  // an unknown letter is an Error listing the known ones
    letters.push_back(item[0]);
  }
  const bench::ThreadsForBench threads(c.threads);
  const Device device = Device::parse(c.device);
  bench::JsonLinesOut out(c.out);
  for (char letter : letters) {
    DecodeBench bench(c, letter, device);
    for (int64_t context : contexts) out.write(bench.measure(context));
  }
  return 0;
}

}  // namespace

Command bench_decode_target() {
  return {"decode", "prompt processing and decoding speed and memory per layer letter and context", run};
}

}  // namespace linea::cli
