#include "autograd/dot.h"

#include <sstream>
#include <unordered_map>
#include <vector>

#include "autograd/node.h"

namespace linea {

namespace {
// A DOT string literal; a line break becomes DOT's own \n escape, so every statement stays on
// one line of the file.
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}
}  // namespace

std::string to_dot(const Tensor& root) {
  std::ostringstream os;
  os << "digraph linea {\n  rankdir=BT;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  const std::shared_ptr<autograd::Node> start = autograd::gradient_edge(root);
  if (!start) {
    os << "  output [label=" << quote("no graph: " + root.describe()) << "];\n}\n";
    return os.str();
  }
  os << "  output [shape=note, label=" << quote(root.describe()) << "];\n";
  std::unordered_map<const autograd::Node*, int> ids;
  std::vector<const autograd::Node*> stack{start.get()};
  ids[start.get()] = 0;
  os << "  output -> n0;\n";
  while (!stack.empty()) {  // iterative: deep graphs must not overflow the stack
    const autograd::Node* node = stack.back();
    stack.pop_back();
    const int id = ids[node];
    if (const auto* acc = dynamic_cast<const autograd::AccumulateGrad*>(node)) {
      const Tensor& leaf = acc->leaf();
      const std::string name = leaf.name().empty() ? "leaf" : leaf.name();
      os << "  n" << id << " [shape=ellipse, style=filled, fillcolor=lightblue, label="
         << quote(name + "\n" + dtype_name(leaf.dtype()) + shape_str(leaf.shape())) << "];\n";
      continue;
    }
    os << "  n" << id << " [shape=box, label=" << quote(node->name()) << "];\n";
    for (const autograd::Edge& e : node->edges) {
      if (!e.node) continue;
      auto [it, inserted] = ids.try_emplace(e.node.get(), static_cast<int>(ids.size()));
      if (inserted) stack.push_back(e.node.get());
      os << "  n" << id << " -> n" << it->second << " [label=" << quote(shape_str(e.shape)) << "];\n";
    }
  }
  os << "}\n";
  return os.str();
}

}  // namespace linea
