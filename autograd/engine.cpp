// The backward engine. Three iterative passes, so that graph depth never touches the stack:
//   1. discover the nodes reachable from the output and count, for each, how many edges point at
//      it (its dependencies);
//   2. (grad() only) mark the nodes that lead to a requested input, so nothing else runs;
//   3. run nodes in a ready queue: a node runs once every node that feeds it a gradient has run
//      (its dependency count reached zero), with its incoming gradients summed per output (a
//      multi-output op's node gets one gradient for each of its outputs). Among ready nodes
//      a leaf's accumulation runs first, then the most recently created: a deterministic order.
#include "autograd/engine.h"

#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "tensor/backend.h"
#include "tensor/creation.h"

namespace linea {

namespace {

using autograd::Node;
using Gradients = std::vector<Tensor>;  // one per output of a node

// The ready queue's order: nodes without edges first (a leaf's AccumulateGrad, whose gradient is
// then final: data-parallel training starts summing it across GPUs at once, rather than after the
// whole pass, since these nodes were created in the first forward and would otherwise come last),
// then the most recently created. Either way each node runs once with its summed gradient, so the
// order changes no value.
struct LaterFirst {
  bool operator()(const Node* a, const Node* b) const {
    const bool a_sink = a->edges.empty(), b_sink = b->edges.empty();
    if (a_sink != b_sink) return b_sink;
    return a->sequence_nr() < b->sequence_nr();
  }
};

std::unordered_map<Node*, int> count_dependencies(Node* root) {
  std::unordered_map<Node*, int> deps{{root, 0}};
  std::vector<Node*> stack{root};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const autograd::Edge& e : node->edges) {
      if (!e.node) continue;
      auto [it, inserted] = deps.try_emplace(e.node.get(), 0);
      ++it->second;
      if (inserted) stack.push_back(e.node.get());
    }
  }
  return deps;
}

// True when an edge of node reaches a node in `useful`.
bool feeds_into(const Node& node, const std::unordered_set<Node*>& useful) {
  return std::any_of(node.edges.begin(), node.edges.end(),
                     [&](const autograd::Edge& e) { return e.node && useful.count(e.node.get()); });
}

// Nodes from which some target is reachable (targets included), by iterating to a fixed point
// in reverse creation order, children before parents.
std::unordered_set<Node*> nodes_leading_to(const std::unordered_map<Node*, int>& deps,
                                           const std::unordered_set<Node*>& targets) {
  std::vector<Node*> order;
  for (const auto& [node, count] : deps) order.push_back(node);
  std::sort(order.begin(), order.end(), [](Node* a, Node* b) { return a->sequence_nr() < b->sequence_nr(); });
  std::unordered_set<Node*> useful(targets);
  // Edges point from later to earlier nodes, so one pass in creation order settles every node.
  for (Node* node : order)
    if (feeds_into(*node, useful)) useful.insert(node);
  return useful;
}

void check_gradient(const Tensor& g, const autograd::Edge& e, const Node& from) {
  LINEA_CHECK(g.shape() == e.shape && g.dtype() == e.dtype && g.device() == e.device, "backward",
              "the backward of ", from.name(), " returned a gradient ", g.describe(), " for an input of ",
              dtype_name(e.dtype), shape_str(e.shape), " on ", e.device.str());
}

// For each of node's inputs, the gradient its other consumers have already sent (undefined where
// none has, or where the node reaches the same tensor through two edges: an addition into one
// would then be the other's too). Node::apply_adding may add them into its own.
std::vector<Tensor> waiting_gradients(const Node& node, const std::unordered_map<Node*, Gradients>& buffers) {
  std::vector<Tensor> waiting(node.edges.size());
  for (size_t i = 0; i < node.edges.size(); ++i) {
    const autograd::Edge& e = node.edges[i];
    if (!e.node) continue;
    bool shared = false;
    for (size_t j = 0; j < node.edges.size(); ++j)
      shared = shared || (j != i && node.edges[j].node == e.node && node.edges[j].output == e.output);
    const auto slots = buffers.find(e.node.get());
    if (shared || slots == buffers.end() || slots->second.empty()) continue;
    waiting[i] = slots->second[static_cast<size_t>(e.output)];
  }
  return waiting;
}

// Runs the graph under `root` with `root_grad`. With `captures` non-null, stops at those nodes
// and records the gradient arriving at each instead of accumulating into leaves.
void run_backward(const Tensor& output, const Tensor& grad_output, bool retain_graph,
                  std::unordered_map<Node*, Gradients>* captures, const GradAccumulatedHook& on_grad_accumulated) {
  LINEA_CHECK(output.defined(), "backward", "called on an undefined tensor");
  std::shared_ptr<Node> root = autograd::gradient_edge(output);
  LINEA_CHECK(root != nullptr, "backward", "the tensor ", output.describe(),
              " does not require grad and has no grad_fn: nothing to differentiate");
  Tensor seed = grad_output;
  if (!seed.defined()) {
    LINEA_CHECK(output.numel() == 1, "backward", "backward() of a non-scalar ", output.describe(),
                " needs an explicit gradient of the same shape");
    seed = ones(output.shape(), {output.dtype(), output.device()});
  }
  LINEA_CHECK(seed.shape() == output.shape() && seed.dtype() == output.dtype() && seed.device() == output.device(),
              "backward", "the gradient ", seed.describe(), " does not match the output ", output.describe());

  NoGradGuard no_grad;  // backward formulas build no graph of their own
  autograd::BackwardFreesSavedScope frees_saved(!retain_graph);  // SavedTensor::overwritable
  auto deps = count_dependencies(root.get());
  std::unordered_set<Node*> useful;
  if (captures) {
    std::unordered_set<Node*> targets;
    for (auto& [node, g] : *captures) targets.insert(node);
    useful = nodes_leading_to(deps, targets);
  }

  std::unordered_map<Node*, Gradients> buffers;
  buffers[root.get()] = Gradients(static_cast<size_t>(root->outputs()));
  buffers[root.get()][static_cast<size_t>(autograd::gradient_output(output))] = seed;
  std::priority_queue<Node*, std::vector<Node*>, LaterFirst> ready;
  ready.push(root.get());
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    Gradients g = std::move(buffers[node]);
    buffers.erase(node);
    const bool any = std::any_of(g.begin(), g.end(), [](const Tensor& x) { return x.defined(); });

    const bool captured = captures && captures->count(node);
    if (captured) (*captures)[node] = g;
    // grad() runs only nodes that pass gradient on towards a requested input: a requested
    // intermediate still runs when another requested input lies behind it, and leaves (no edges)
    // are never touched.
    const bool skip = captures && !feeds_into(*node, useful);
    std::vector<Tensor> input_grads;
    std::vector<bool> took;  // took[i]: input_grads[i] already holds what was waiting for input i
    if (any && !skip) {
      std::vector<Tensor> waiting = waiting_gradients(*node, buffers);
      std::vector<bool> offered(waiting.size());
      for (size_t i = 0; i < waiting.size(); ++i) offered[i] = waiting[i].defined();
      input_grads = node->apply_adding(g, waiting);
      took.resize(waiting.size());
      for (size_t i = 0; i < waiting.size(); ++i) took[i] = offered[i] && !waiting[i].defined();
      if (on_grad_accumulated)
        if (const auto* accumulate = dynamic_cast<const autograd::AccumulateGrad*>(node))
          on_grad_accumulated(accumulate->leaf());
    }
    for (size_t i = 0; i < node->edges.size(); ++i) {
      const autograd::Edge& e = node->edges[i];
      if (!e.node) continue;
      Node* next = e.node.get();
      if (i < input_grads.size() && input_grads[i].defined()) {
        check_gradient(input_grads[i], e, *node);
        Gradients& slots = buffers[next];
        if (slots.empty()) slots.resize(static_cast<size_t>(next->outputs()));
        Tensor& slot = slots[static_cast<size_t>(e.output)];
        if (!slot.defined() || (i < took.size() && took[i])) {
          slot = input_grads[i];
        } else {
          Tensor sum = empty(slot.shape(), slot.dtype(), slot.device());
          backend_for(sum).binary(BinaryOp::Add, slot, input_grads[i], sum);
          slot = sum;
        }
      }
      if (--deps[next] == 0) ready.push(next);
    }
    if (!retain_graph) node->release();
  }
}

}  // namespace

void backward(const Tensor& output, const Tensor& grad_output, bool retain_graph) {
  run_backward(output, grad_output, retain_graph, nullptr, {});
}

void backward(const Tensor& output, const Tensor& grad_output, bool retain_graph,
              const GradAccumulatedHook& on_grad_accumulated) {
  run_backward(output, grad_output, retain_graph, nullptr, on_grad_accumulated);
}

std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& grad_output,
                         bool retain_graph, bool allow_unused) {
  std::unordered_map<Node*, Gradients> captures;
  // Held until the end: the AccumulateGrad of a leaf outside the graph exists only here, and a
  // freed one's address could be reused by the next input's.
  std::vector<std::shared_ptr<Node>> input_nodes;
  for (const Tensor& x : inputs) {
    LINEA_CHECK(x.defined() && x.requires_grad(), "grad", "every input must require grad, got ",
                x.describe());
    input_nodes.push_back(autograd::gradient_edge(x));
    captures[input_nodes.back().get()] = {};
  }
  run_backward(output, grad_output, retain_graph, &captures, {});
  std::vector<Tensor> result;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Gradients& all = captures[input_nodes[i].get()];
    const auto output = static_cast<size_t>(autograd::gradient_output(inputs[i]));
    const Tensor g = output < all.size() ? all[output] : Tensor();
    LINEA_CHECK(g.defined() || allow_unused, "grad", "input ", i, " (", inputs[i].describe(),
                ") was not used to compute the output; pass allow_unused = true to get an undefined gradient");
    result.push_back(g);
  }
  return result;
}

}  // namespace linea
