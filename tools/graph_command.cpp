// `linea graph [WHAT]`: the autograd graph behind a small computation, as Graphviz DOT (and a PNG
// or SVG when Graphviz's `dot` is installed). The graph is what backward walks: one box per op of
// the forward, each named after the node that computes its gradients, edges pointing the way
// gradients flow (autograd/dot.h). WHAT is the README's taste (an expression) or one layer of
// the model, by letter or name (`linea train --help` lists them), run on a (1, 4, 16) input.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "autograd/dot.h"
#include "autograd/ops.h"
#include "nn/config.h"
#include "nn/model.h"
#include "tensor/random.h"
#include "tools/commands.h"
#include "tools/flags.h"

namespace linea::cli {

namespace {

// The layer kind WHAT names: its letter or its name; a usage error naming the known ones else.
const nn::LayerKind& layer_named(const std::string& what, const Flags& flags) {
  std::string known;
  for (const nn::LayerKind& kind : nn::layer_kinds()) {
    if (what == kind.name || what == std::string(1, kind.letter)) return kind;
    known += " " + kind.name + " (" + kind.letter + ")";
  }
  flags.fail("no layer '" + what + "'; WHAT is 'expression' or a layer:" + known);
}

// sum(mixer(x)) for one layer on a small input: its whole forward, whose graph backward walks.
Tensor layer_output(const nn::LayerKind& kind) {
  nn::ModelConfig config;
  config.d_model = 16;
  config.heads = 2;
  config.pattern = std::string(1, kind.letter);
  Generator gen(7);
  const std::shared_ptr<nn::SequenceMixer> mixer = kind.make(config, gen);
  for (nn::NamedParameter& p : mixer->named_parameters()) p.tensor.set_name(p.name);  // leaves show their names
  Tensor x = randn({1, 4, config.d_model}, kFloat32, &gen).requires_grad_();
  x.set_name("x");
  return sum(mixer->forward(x));
}

// The README's taste: mean(square(tanh(x @ w))).
Tensor expression_output() {
  Generator gen(7);
  Tensor w = randn({4, 3}, kFloat64, &gen).requires_grad_();
  w.set_name("w");
  const Tensor x = randn({8, 4}, kFloat64, &gen);
  return mean(square(tanh(matmul(x, w))));
}

int run(const std::string& program, std::span<const std::string> args) {
  std::vector<std::string> what;
  std::string out = "graph.dot", format = "png";
  Flags flags(program,
              "Writes the autograd graph behind WHAT as Graphviz DOT: 'expression' (the README's taste, the\n"
              "default), or one layer of the model by letter or name on a (1, 4, 16) input. The graph is\n"
              "what backward walks: a box per op of the forward, named after the node that computes its\n"
              "gradients; edges point the way gradients flow. With Graphviz's `dot` installed, it is also\n"
              "rendered next to the DOT file.");
  flags.add_rest("WHAT", &what, "'expression' or a layer letter or name");
  flags.add("out", &out, "DOT file to write");
  flags.add_choice("format", &format, {"png", "svg", "none"}, "image rendered by `dot` when it is installed");
  if (!flags.parse(args)) return 0;
  if (what.size() > 1) flags.fail("one WHAT at a time, got " + std::to_string(what.size()));
  if (out.find('\'') != std::string::npos) flags.fail("--out may not contain a single quote (it goes to `dot`)");
  const std::string name = what.empty() ? "expression" : what.front();
  const Tensor root = name == "expression" ? expression_output() : layer_output(layer_named(name, flags));

  const std::string dot = to_dot(root);
  {
    std::ofstream file(out);
    file << dot;
    file.close();
    if (!file) throw Error("could not write " + out);
  }
  std::printf("the graph of %s (%zu bytes of DOT) written to %s\n", name.c_str(), dot.size(), out.c_str());
  if (format == "none") return 0;
  if (std::system("command -v dot >/dev/null 2>&1") != 0) {
    std::printf("Graphviz's dot is not installed (apt-get install graphviz); render it with: dot -T%s %s -o %s.%s\n",
                format.c_str(), out.c_str(), out.c_str(), format.c_str());
    return 0;
  }
  const std::string image = out + "." + format;
  const std::string command = "dot -T" + format + " '" + out + "' -o '" + image + "'";
  if (std::system(command.c_str()) != 0) throw Error("dot could not render " + out + " (ran: " + command + ")");
  std::printf("rendered to %s\n", image.c_str());
  return 0;
}

}  // namespace

Command graph_command() { return {"graph", "write the autograd graph of an expression or a layer as Graphviz DOT", run}; }

}  // namespace linea::cli
