// The README's taste of linea, as a program built against the installed package
// (examples/README.md): a small expression, its gradient by backward(), and the same gradient
// checked against finite differences. Exits non-zero if the check fails.
#include <iostream>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"

using namespace linea;

int main() {
  Tensor w = randn({4, 3}, kFloat64).requires_grad_();
  Tensor x = randn({8, 4}, kFloat64);
  Tensor loss = mean(square(tanh(matmul(x, w))));
  backward(loss);  // w.grad() now holds d loss / d w
  std::cout << "loss = " << loss.item() << "\nd loss / d w =\n" << w.grad() << "\n";

  // The same gradient from central finite differences in float64 (autograd/gradcheck.h).
  const auto f = [&x](const std::vector<Tensor>& in) { return mean(square(tanh(matmul(x, in[0])))); };
  const gradcheck::Result check = gradcheck::check(f, {detach(w).requires_grad_()});
  std::cout << "gradient check: " << (check.passed ? "passed" : "FAILED") << " (worst error " << check.worst_error
            << " over " << check.compared << " values)\n";
  return check.passed ? 0 : 1;
}
