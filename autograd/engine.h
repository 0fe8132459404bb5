#pragma once
// Reverse-mode differentiation: walks the graph from an output back to the leaves.
#include <vector>

#include "tensor/tensor.h"

namespace linea {

// Accumulates d(output)/d(leaf) into leaf.grad() of every leaf that requires grad. output must be
// a one-element tensor, unless grad_output (output's shape) is given. The graph is freed
// afterwards unless retain_graph is true.
void backward(const Tensor& output, const Tensor& grad_output = Tensor(), bool retain_graph = false);

// Returns d(output)/d(input) for each input (leaves or intermediate tensors) without touching
// any .grad; an input that output does not depend on is an error unless allow_unused, which
// gives an undefined tensor instead.
std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs,
                         const Tensor& grad_output = Tensor(), bool retain_graph = false,
                         bool allow_unused = false);

}  // namespace linea
