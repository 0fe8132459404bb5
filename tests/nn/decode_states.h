#pragma once
// Helpers of the tests of prefill and stacked decoding states (tests/nn/prefill_test.cpp, and the
// GPU's tests/cuda/prefill_parity_test.cpp): feed a prompt token by token, and compare two
// decoding states member by member.
#include <string>
#include <utility>

#include "nn/model.h"
#include "tests/nn/mixer_forms.h"

namespace linea::testing {

// The prompt ids (B, T) fed token by token through step(): the logits after its last token.
inline Tensor step_through(nn::LanguageModel& model, const Tensor& ids, nn::LanguageModel::State& state) {
  Tensor logits;
  for (int64_t t = 0; t < ids.size(1); ++t) logits = model.step(select(ids, 1, t), state);
  return logits;
}

// The largest relative difference between two states, member by member (both must hold the same
// members, defined alike, at the same positions); `worst` names that member.
inline double state_diff(const nn::LanguageModel::State& a, const nn::LanguageModel::State& b, std::string& worst) {
  EXPECT_EQ(a.position, b.position);
  EXPECT_EQ(a.layers.size(), b.layers.size());
  double largest = 0.0;
  for (size_t i = 0; i < a.layers.size() && i < b.layers.size(); ++i) {
    EXPECT_EQ(a.layers[i]->position, b.layers[i]->position) << "layer " << i;
    const auto ta = a.layers[i]->tensors(), tb = b.layers[i]->tensors();
    EXPECT_EQ(ta.size(), tb.size());
    for (size_t m = 0; m < ta.size() && m < tb.size(); ++m) {
      const std::string name = "layer " + std::to_string(i) + " " + ta[m].first;
      EXPECT_EQ(ta[m].second.defined(), tb[m].second.defined()) << name;
      if (!ta[m].second.defined() || !tb[m].second.defined()) continue;
      const double d = relative_diff(to(ta[m].second, kCPU), to(tb[m].second, kCPU));
      if (d >= largest) largest = d, worst = name;
    }
  }
  return largest;
}

}  // namespace linea::testing
