#include "autograd/node.h"

#include <atomic>

#include "autograd/grad_mode.h"
#include "tensor/backend.h"
#include "tensor/transfer.h"

namespace linea::autograd {

namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};
thread_local std::vector<Node*>* t_pending_deletes = nullptr;
thread_local bool t_backward_frees_saved = false;
}  // namespace

bool backward_frees_saved() { return t_backward_frees_saved; }
void set_backward_frees_saved(bool frees) { t_backward_frees_saved = frees; }

Node::Node(std::string name) : name_(std::move(name)), sequence_nr_(g_next_sequence_nr++) {}

void NodeDeleter::operator()(Node* node) const {
  if (t_pending_deletes != nullptr) {  // inside an outer deletion: queue, do not recurse
    t_pending_deletes->push_back(node);
    return;
  }
  std::vector<Node*> queue{node};
  t_pending_deletes = &queue;
  while (!queue.empty()) {
    Node* next = queue.back();
    queue.pop_back();
    delete next;  // dropping its edges may queue more nodes
  }
  t_pending_deletes = nullptr;
}

namespace {
// A view's home: the home of what it views, seen through the same view.
class ViewedHome final : public GradientHome {
 public:
  ViewedHome(std::shared_ptr<GradientHome> of, std::function<Tensor(const Tensor&)> view_of)
      : of_(std::move(of)), view_of_(std::move(view_of)) {}
  Tensor claim() override {
    const Tensor memory = of_->claim();
    return memory.defined() ? view_of_(memory) : memory;
  }

 private:
  std::shared_ptr<GradientHome> of_;
  std::function<Tensor(const Tensor&)> view_of_;
};
}  // namespace

std::shared_ptr<GradientHome> gradient_home(const Tensor& t) {
  return t.defined() && t.requires_grad() ? t.autograd_meta().gradient_home : nullptr;
}

void set_gradient_home(const Tensor& t, std::shared_ptr<GradientHome> home) {
  if (home) t.autograd_meta().gradient_home = std::move(home);
}

std::shared_ptr<GradientHome> home_through_view(std::shared_ptr<GradientHome> home,
                                                std::function<Tensor(const Tensor&)> view_of) {
  if (!home) return nullptr;
  return std::make_shared<ViewedHome>(std::move(home), std::move(view_of));
}

Tensor claim(const std::shared_ptr<GradientHome>& home) { return home ? home->claim() : Tensor(); }

Tensor alias_without_autograd(const Tensor& t) {
  if (!t.defined()) return t;
  return make_view(t, t.shape(), t.strides(), t.offset());
}

SavedTensor::SavedTensor(const Tensor& t) : data_(alias_without_autograd(t)), version_(t.defined() ? t.version() : 0) {}

Tensor SavedTensor::get() const {
  if (data_.defined())
    LINEA_CHECK(data_.version() == version_, "backward",
                "a tensor saved for backward (", data_.describe(), ") was modified in place after it "
                "was saved (version ", version_, " -> ", data_.version(), "); use an out-of-place op "
                "or clone() it before modifying");
  return data_;
}

Tensor SavedTensor::overwritable() const {
  // is_sole_owner before get(): the copy get() returns would be a second holder.
  if (!data_.defined() || !backward_frees_saved() || !data_.is_sole_owner()) return Tensor();
  return get();
}

Grads FunctionNode::apply(const Tensor& grad_output) {
  LINEA_CHECK(fn_ != nullptr, "backward",
              "trying to backward through the graph a second time (at ", name(),
              "): its saved tensors were freed; pass retain_graph = true to the first backward");
  return fn_(grad_output);
}

Grads AddingNode::apply(const Tensor& grad_output) {
  std::vector<Tensor> none(edges.size());
  return apply_adding({grad_output}, none);
}

Grads AddingNode::apply_adding(const std::vector<Tensor>& grad_outputs, std::vector<Tensor>& waiting) {
  LINEA_CHECK(fn_ != nullptr, "backward",
              "trying to backward through the graph a second time (at ", name(),
              "): its saved tensors were freed; pass retain_graph = true to the first backward");
  return fn_(grad_outputs[0], waiting);
}

Grads MultiOutputNode::apply(const Tensor& grad_output) {
  std::vector<Tensor> grads(static_cast<size_t>(outputs_));
  grads[0] = grad_output;
  return apply_outputs(grads);
}

Grads MultiOutputNode::apply_outputs(const std::vector<Tensor>& grad_outputs) {
  LINEA_CHECK(fn_ != nullptr, "backward",
              "trying to backward through the graph a second time (at ", name(),
              "): its saved tensors were freed; pass retain_graph = true to the first backward");
  return fn_(grad_outputs);
}

namespace {

// Whether the leaf may keep `g` itself as its gradient (PyTorch's AccumulateGrad does the same):
// nobody else can reach it (the engine hands it over, and no other node's gradient or view shares
// it), and it is laid out as a fresh gradient would be, filling exactly its own memory.
bool can_keep(const Tensor& g, const Tensor& leaf) {
  return g.is_sole_owner() && !g.requires_grad() && g.is_contiguous() && g.offset() == 0 &&
         g.shape() == leaf.shape() && g.dtype() == leaf.dtype() && g.device() == leaf.device() &&
         g.storage()->nbytes() == static_cast<size_t>(g.numel()) * dtype_size(g.dtype());
}

}  // namespace

Grads AccumulateGrad::apply(const Tensor& grad_output) {
  const Tensor current = leaf_.grad();
  if (!current.defined()) {
    // The first gradient: kept as it is when nothing else can reach it (a weight's gradient from
    // its product, most often), else a fresh contiguous copy (it may be a broadcast view, a slice
    // of a larger buffer, or another node's gradient too).
    leaf_.set_grad(can_keep(grad_output, leaf_) ? grad_output : copy_to(grad_output, grad_output.device()));
  } else {
    backend_for(current).binary(BinaryOp::Add, current, grad_output, current);
    current.bump_version();
  }
  return {};
}

std::shared_ptr<Node> gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return nullptr;
  if (t.grad_fn()) return t.grad_fn();
  AutogradMeta& meta = t.autograd_meta();
  std::shared_ptr<Node> acc = meta.grad_accumulator.lock();
  if (!acc) {
    acc = make_node<AccumulateGrad>(t);
    meta.grad_accumulator = acc;
  }
  return acc;
}

int gradient_output(const Tensor& t) { return t.defined() && t.grad_fn() ? t.autograd_meta().output_nr : 0; }

namespace {

// The node's edges to its inputs (an undefined input: an empty edge).
void connect(Node& node, const std::vector<Tensor>& inputs) {
  node.edges.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    if (t.defined()) node.edges.push_back({gradient_edge(t), t.shape(), t.dtype(), t.device(), gradient_output(t)});
    else node.edges.push_back({});
  }
}

void make_output(Tensor& output, std::shared_ptr<Node> node, int index) {
  AutogradMeta& meta = output.autograd_meta();
  meta.grad_fn = std::move(node);
  meta.output_nr = index;
  meta.requires_grad = true;
}

}  // namespace

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!is_grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

bool needs_grad(std::initializer_list<Tensor> inputs) { return needs_grad(std::vector<Tensor>(inputs)); }

namespace {

// A node of type N with backward fn over inputs, made output's grad_fn (if any input needs grad).
template <class N, class Fn>
Tensor record_node(const char* name, const std::vector<Tensor>& inputs, Tensor output, Fn fn) {
  if (!needs_grad(inputs)) return output;
  auto node = make_node<N>(name, std::move(fn));
  connect(*node, inputs);
  make_output(output, std::move(node), 0);
  return output;
}

}  // namespace

Tensor record(const char* name, const std::vector<Tensor>& inputs, Tensor output, BackwardFn fn) {
  return record_node<FunctionNode>(name, inputs, std::move(output), std::move(fn));
}

Tensor record_adding(const char* name, const std::vector<Tensor>& inputs, Tensor output, AddingBackwardFn fn) {
  return record_node<AddingNode>(name, inputs, std::move(output), std::move(fn));
}

std::vector<Tensor> record_outputs(const char* name, const std::vector<Tensor>& inputs, std::vector<Tensor> outputs,
                                   MultiBackwardFn fn) {
  if (!needs_grad(inputs)) return outputs;
  auto node = make_node<MultiOutputNode>(name, static_cast<int>(outputs.size()), std::move(fn));
  connect(*node, inputs);
  for (size_t i = 0; i < outputs.size(); ++i) make_output(outputs[i], node, static_cast<int>(i));
  return outputs;
}

}  // namespace linea::autograd
