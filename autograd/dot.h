#pragma once
// Graphviz export of the graph behind a tensor: what backward will walk. Ops are boxes named
// after their node, leaves are ellipses with their name and shape; edges point from an op to the
// nodes that produced its inputs, the direction gradients flow.
//   std::ofstream("graph.dot") << to_dot(loss);   then: dot -Tpng graph.dot -o graph.png
#include <string>

#include "tensor/tensor.h"

namespace linea {

std::string to_dot(const Tensor& root);

}  // namespace linea
