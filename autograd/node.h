#pragma once
// The graph. Every tensor produced by a recorded op points (grad_fn) at the Node that made it; a
// node's edges point at the nodes that made its inputs, and a leaf that requires grad is reached
// through its AccumulateGrad node. backward (engine.h) walks these edges from the loss.
//
// Most nodes made one tensor. A multi-output op (record_outputs) makes one node with several
// outputs: each output gets its own gradient, and the node's backward receives them together, so
// that no output's gradient is padded with zeros to the others' size and summed with theirs.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/scoped_setting.h"
#include "tensor/tensor.h"

namespace linea::autograd {

class Node;

// Where an input's gradient goes, and what it must look like when it gets there.
struct Edge {
  std::shared_ptr<Node> node;  // null: that input needs no gradient
  Shape shape;
  DType dtype = kFloat32;
  Device device;
  int output = 0;  // which of node's outputs the input was
};

class Node {
 public:
  explicit Node(std::string name);
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const std::string& name() const { return name_; }
  // Creation order: the engine runs later nodes first, so the order is deterministic.
  uint64_t sequence_nr() const { return sequence_nr_; }

  // Gradients of the inputs (one per edge, undefined where none) given the output's gradient.
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  // How many tensors the node made, and the gradients of its inputs given each output's gradient
  // (undefined where none arrived; the engine calls this one). One output: apply.
  virtual int outputs() const { return 1; }
  virtual std::vector<Tensor> apply_outputs(const std::vector<Tensor>& grad_outputs) { return apply(grad_outputs[0]); }
  // What the engine calls. waiting[i] is the gradient already gathered for input i from the
  // input's other consumers (undefined: none yet). A node may add it into its own gradient for
  // that input in the same pass and then clear waiting[i]: the engine takes the result as the
  // whole gradient instead of adding the two (a norm's backward does, for a pre-norm block's
  // residual stream: record_adding). By default none is taken.
  virtual std::vector<Tensor> apply_adding(const std::vector<Tensor>& grad_outputs, std::vector<Tensor>& waiting) {
    (void)waiting;
    return apply_outputs(grad_outputs);
  }
  // Frees what backward saved; called after backward unless the graph is retained.
  virtual void release() {}
  virtual bool released() const { return false; }

  std::vector<Edge> edges;

 private:
  std::string name_;
  uint64_t sequence_nr_;
};

// Deletes nodes without recursion: releasing the last handle on a 100,000-node chain would
// otherwise recurse once per node through the edges and overflow the stack.
struct NodeDeleter {
  void operator()(Node* node) const;
};

template <class N, class... Args>
std::shared_ptr<N> make_node(Args&&... args) {
  return std::shared_ptr<N>(new N(std::forward<Args>(args)...), NodeDeleter{});
}

// Whether the backward running on this thread frees each node's saved tensors once the node has
// run (no retain_graph): a node's backward is then their last reader. The engine sets it.
bool backward_frees_saved();
void set_backward_frees_saved(bool frees);
using BackwardFreesSavedScope = ScopedSetting<bool, backward_frees_saved, set_backward_frees_saved>;

// Where a tensor's gradient goes in the end, offered to the op that produces it, so that the
// gradient is written there instead of copied there. split's pieces have one: their slices of
// the buffer the split's backward assembles the whole gradient in (autograd/ops/views.cpp), and so
// do views of them, that buffer seen through the same view. An op whose backward allocates an
// input's gradient takes the input's home at forward time and claims it at backward time
// (gradient_buffer in autograd/ops/common.h): the first claim gets the memory, any later one (a
// second consumer of the same piece) nothing, and allocates as before, so two gradients never
// share memory; the engine then adds them as usual, and split copies the sum into place.
class GradientHome {
 public:
  virtual ~GradientHome() = default;
  // The memory (a view of the piece's shape), or undefined when it was claimed before.
  virtual Tensor claim() = 0;
};

// t's home, or null (a tensor that does not take part in autograd has none).
std::shared_ptr<GradientHome> gradient_home(const Tensor& t);
// Gives t a home: `home` itself, or for a view of a tensor with one, that home seen through the view
// (home_through_view).
void set_gradient_home(const Tensor& t, std::shared_ptr<GradientHome> home);
// The home of a view y = view_of(x) of a tensor x with home `home` (null when x has none).
std::shared_ptr<GradientHome> home_through_view(std::shared_ptr<GradientHome> home,
                                                std::function<Tensor(const Tensor&)> view_of);
// home's memory when it is there to claim; undefined otherwise (no home, or claimed before).
// Ops call it through gradient_buffer (autograd/ops/common.h).
Tensor claim(const std::shared_ptr<GradientHome>& home);

// A tensor saved for backward. It keeps the values (a detached alias: saving an op's own output
// must not make a reference cycle through its grad_fn) and the storage version at save time, so
// that use after an in-place write is an error instead of a wrong gradient.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  Tensor get() const;  // throws if the tensor was modified in place since it was saved
  // The saved tensor, for a backward that may overwrite it: when that backward is its last reader
  // (the engine frees saved tensors after it: no retain_graph, backward_frees_saved) and nothing
  // else holds its memory (this saved alias is the storage's one reference). Undefined otherwise.
  Tensor overwritable() const;
  bool defined() const { return data_.defined(); }

 private:
  Tensor data_;
  uint64_t version_ = 0;
};

// A detached alias: same storage and view, no autograd state.
Tensor alias_without_autograd(const Tensor& t);

using Grads = std::vector<Tensor>;
using BackwardFn = std::function<Grads(const Tensor& grad_output)>;

// The node of an ordinary op: its backward formula is a closure over what it saved.
class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, BackwardFn fn) : Node(std::move(name)), fn_(std::move(fn)) {}
  Grads apply(const Tensor& grad_output) override;
  void release() override { fn_ = nullptr; }
  bool released() const override { return !fn_; }

 private:
  BackwardFn fn_;
};

// The node of an op whose backward can add the gradients already waiting for its inputs into its
// own (record_adding; Node::apply_adding).
using AddingBackwardFn = std::function<Grads(const Tensor& grad_output, std::vector<Tensor>& waiting)>;
class AddingNode final : public Node {
 public:
  AddingNode(std::string name, AddingBackwardFn fn) : Node(std::move(name)), fn_(std::move(fn)) {}
  Grads apply(const Tensor& grad_output) override;
  Grads apply_adding(const std::vector<Tensor>& grad_outputs, std::vector<Tensor>& waiting) override;
  void release() override { fn_ = nullptr; }
  bool released() const override { return !fn_; }

 private:
  AddingBackwardFn fn_;
};

// The node of a multi-output op (record_outputs).
using MultiBackwardFn = std::function<Grads(const std::vector<Tensor>& grad_outputs)>;
class MultiOutputNode final : public Node {
 public:
  MultiOutputNode(std::string name, int outputs, MultiBackwardFn fn)
      : Node(std::move(name)), outputs_(outputs), fn_(std::move(fn)) {}
  int outputs() const override { return outputs_; }
  Grads apply(const Tensor& grad_output) override;  // the first output's gradient alone
  Grads apply_outputs(const std::vector<Tensor>& grad_outputs) override;
  void release() override { fn_ = nullptr; }
  bool released() const override { return !fn_; }

 private:
  int outputs_;
  MultiBackwardFn fn_;
};

// The end of the walk at a leaf: adds the incoming gradient into leaf.grad.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const Tensor& leaf) : Node("AccumulateGrad"), leaf_(leaf) {}
  Grads apply(const Tensor& grad_output) override;
  const Tensor& leaf() const { return leaf_; }

 private:
  Tensor leaf_;
};

// The node through which gradients reach tensor t: its grad_fn, or for a leaf that requires
// grad its (shared) AccumulateGrad; null when t needs no gradient.
std::shared_ptr<Node> gradient_edge(const Tensor& t);
// Which output of gradient_edge(t) t is (0 but for the outputs of a multi-output op).
int gradient_output(const Tensor& t);

// True when grad mode is on and some input requires grad.
bool needs_grad(std::initializer_list<Tensor> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// Makes `output` the result of a node named `name` over `inputs` with backward `fn`, if any
// input needs a gradient (else fn is dropped). Returns output. Every differentiable op ends here.
Tensor record(const char* name, const std::vector<Tensor>& inputs, Tensor output, BackwardFn fn);
// The same for an op with several outputs: one node, whose backward fn receives every output's
// gradient in order (undefined where none arrived). Returns the outputs.
std::vector<Tensor> record_outputs(const char* name, const std::vector<Tensor>& inputs, std::vector<Tensor> outputs,
                                   MultiBackwardFn fn);
// record() for an op whose backward may add the gradients waiting for its inputs into its own
// (AddingNode).
Tensor record_adding(const char* name, const std::vector<Tensor>& inputs, Tensor output, AddingBackwardFn fn);

}  // namespace linea::autograd
