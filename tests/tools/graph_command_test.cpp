// `linea graph`: the autograd graph of the README's expression and of every layer kind as
// Graphviz DOT, in process (tools/graph_command.cpp); a WHAT that names nothing is a usage error.
#include <string>
#include <vector>

#include "nn/model.h"
#include "tests/test_util.h"
#include "tests/train/temp_dir.h"
#include "tools/command.h"
#include "tools/commands.h"
#include "train/file_io.h"

namespace linea::cli {
namespace {

using linea::testing::TempDir;

int run_graph(std::vector<std::string> args) {
  args.insert(args.begin(), "graph");
  return run_main(linea_commands(), args);
}

// The DOT is one digraph holding every label given: an op's label is its name in quotes, a
// leaf's starts with its name and a line break (\n), then its dtype and shape.
void expect_graph(const std::string& dot, const std::vector<std::string>& nodes, const std::string& what) {
  EXPECT_EQ(dot.rfind("digraph", 0), 0u) << what << ":\n" << dot.substr(0, 200);
  EXPECT_EQ(dot.substr(dot.find_last_not_of('\n'), 1), "}") << what;
  for (const std::string& node : nodes) EXPECT_NE(dot.find(node), std::string::npos) << what << " lacks " << node;
}

TEST(GraphCommand, TheExpressionShowsEveryOpBackwardWalks) {
  const TempDir dir;
  const std::string out = dir / "taste.dot";
  ASSERT_EQ(run_graph({"expression", "--out", out, "--format", "none"}), 0);
  // mean is a sum times 1/n; w is the one leaf that requires grad (x is a constant).
  expect_graph(train::read_file(out, "graph"), {"\"matmul\"", "\"tanh\"", "\"square\"", "\"sum\"", "\"w\\n"},
               "expression");
}

TEST(GraphCommand, EveryLayerKindByLetterAndByName) {
  const TempDir dir;
  for (const nn::LayerKind& kind : nn::layer_kinds()) {
    const std::string by_letter = dir / (kind.name + "_letter.dot"), by_name = dir / (kind.name + ".dot");
    ASSERT_EQ(run_graph({std::string(1, kind.letter), "--out", by_letter, "--format", "none"}), 0) << kind.name;
    ASSERT_EQ(run_graph({kind.name, "--out", by_name, "--format", "none"}), 0) << kind.name;
    const std::string dot = train::read_file(by_name, "graph");
    // Every layer projects its input and sums to the root, and its leaves show their names (the
    // input x and every parameter); the same layer gives the same graph.
    std::vector<std::string> nodes = {"\"matmul\"", "\"sum\"", "\"x\\n"};
    nn::ModelConfig config;
    config.d_model = 16;
    config.heads = 2;
    config.pattern = std::string(1, kind.letter);
    Generator gen(7);
    for (const nn::NamedParameter& p : kind.make(config, gen)->named_parameters()) nodes.push_back("\"" + p.name + "\\n");
    expect_graph(dot, nodes, kind.name);
    EXPECT_EQ(dot, train::read_file(by_letter, "graph")) << kind.name;
  }
}

TEST(GraphCommand, UnknownWhatIsAUsageError) {
  const TempDir dir;
  EXPECT_EQ(run_graph({"no-such-layer", "--out", dir / "x.dot", "--format", "none"}), kExitUsage);
  EXPECT_EQ(run_graph({"expression", "softmax", "--out", dir / "x.dot"}), kExitUsage);
  EXPECT_EQ(run_graph({"expression", "--out", dir / "x.dot", "--format", "gif"}), kExitUsage);
}

}  // namespace
}  // namespace linea::cli
