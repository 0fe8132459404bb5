#pragma once
// For kernels that write contiguous outputs, behind an interface whose outputs may be any view
// (tensor/backend.h says which): runs f on contiguous stand-ins for the outputs that are not
// contiguous (an undefined output stays undefined), then copies the stand-ins into place.
#include <initializer_list>
#include <vector>

#include "tensor/backend.h"
#include "tensor/creation.h"

namespace linea {

template <class F>
void with_contiguous_outputs(const Backend& backend, std::initializer_list<const Tensor*> outputs, F&& f) {
  std::vector<Tensor> stand_ins;
  for (const Tensor* x : outputs) stand_ins.push_back(!x->defined() || x->is_contiguous() ? *x : empty_like(*x));
  f(stand_ins);
  size_t i = 0;
  for (const Tensor* x : outputs) {
    const Tensor& s = stand_ins[i++];
    if (s.defined() && !s.is_same(*x)) backend.copy(s, *x);
  }
}

}  // namespace linea
