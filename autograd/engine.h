#pragma once
// Reverse-mode differentiation: walks the graph from an output back to the leaves.
#include <functional>
#include <vector>

#include "tensor/tensor.h"

namespace linea {

// Accumulates d(output)/d(leaf) into leaf.grad() of every leaf that requires grad. output must be
// a one-element tensor, unless grad_output (output's shape) is given. The graph is freed
// afterwards unless retain_graph is true.
void backward(const Tensor& output, const Tensor& grad_output = Tensor(), bool retain_graph = false);

// Called during backward() once per leaf that received a gradient, right after that gradient was
// added into leaf.grad(): nothing later in the pass touches it again. Data-parallel training uses
// it to start summing a bucket of gradients across GPUs while the rest of the pass still runs
// (train/gradient_sync.h), as PyTorch's post-accumulate-grad hooks let DDP do.
using GradAccumulatedHook = std::function<void(const Tensor& leaf)>;
void backward(const Tensor& output, const Tensor& grad_output, bool retain_graph,
              const GradAccumulatedHook& on_grad_accumulated);

// Returns d(output)/d(input) for each input (leaves or intermediate tensors) without touching
// any .grad; an input that output does not depend on is an error unless allow_unused, which
// gives an undefined tensor instead.
std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs,
                         const Tensor& grad_output = Tensor(), bool retain_graph = false,
                         bool allow_unused = false);

}  // namespace linea
