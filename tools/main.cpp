#include <iostream>
#include "autograd/ops.h"
int main() {
  using namespace linea;
  Tensor x = randn({2, 3}, kFloat64).requires_grad_();
  Tensor y = sum(exp(x) * x);
  backward(y);
  std::cout << x << "\n" << x.grad() << "\n";
}
