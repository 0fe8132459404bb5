#pragma once
// A tiny language model whose every parameter is NaN, so every logit is NaN: for the tests that
// generation refuses logits it cannot sample (tests/train/sampling_test.cpp and, on the GPU,
// tests/cuda/sample_tokens_test.cpp).
#include <limits>
#include <memory>
#include <string>

#include "nn/model.h"

namespace linea::testing {

inline std::unique_ptr<nn::LanguageModel> model_of_nans(const std::string& pattern) {
  nn::ModelConfig c;
  c.vocab_size = 11;
  c.d_model = 8;
  c.heads = 2;
  c.pattern = pattern;
  Generator gen(1);
  auto model = std::make_unique<nn::LanguageModel>(c, gen);
  NoGradGuard no_grad;
  for (Tensor p : model->parameters()) fill_(p, std::numeric_limits<double>::quiet_NaN());
  return model;
}

}  // namespace linea::testing
