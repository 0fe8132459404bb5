#pragma once
// Post-linearization, the model side: a model whose pattern differs from a trained softmax
// model's only in which layers are softmax (S) and which are a linear-family letter (L, H, A, F,
// G, R, D) takes every weight of the trained one that carries over (docs/linearize.md):
//
//   embeddings, norms, MLPs, unchanged layers    same name, same shape
//   a replaced layer's q, k, v projections       blocks.<i>.mixer.{q,k,v}_proj.*  (same names)
//   a replaced layer's output projection         blocks.<i>.mixer.o_proj.* -> blocks.<i>.mixer.out_proj.*
//   the new layer's own parameters               (gates, feature maps, output norm) keep their
//                                                letter's initialisation
//
// Softmax attention rotates q and k (RoPE) and scales by 1/sqrt(d); the linear layers feed the
// same projections through their feature map instead, which is what attention transfer
// (train/linearize.h) then trains to match. Anything that cannot carry over is an error naming the
// layer and the shapes: another pattern length or width, a letter whose layer has no q/k/v/o
// projections (Griffin U, WQKV W), grouped-query softmax heads (k_proj narrower than the linear
// layer's), a feature_dim override.
#include <string>
#include <vector>

#include "nn/model.h"

namespace linea::nn {

// Where one entry of the new model's state dict came from: `source` names the trained model's
// entry it was copied from; empty: the new model's own initialisation.
struct WeightOrigin {
  std::string name;
  std::string source;
};

struct Linearization {
  std::vector<int64_t> replaced;      // the layers whose softmax mixer became a linear one
  std::vector<WeightOrigin> origins;  // every entry of the new model's state dict, sorted by name
};

// Checks that target_config linearizes source_config: the same pattern length and model shape
// (vocabulary, width, heads, norm, MLP, tied head), and at every position either the same letter
// or S -> a linear-family letter. Returns the replaced layers; errors name the field or layer.
std::vector<int64_t> linearized_layers(const ModelConfig& source_config, const ModelConfig& target_config);

// Copies every weight of `source` (a state dict of a model of source_config) that carries over
// into `target`, and says where each of target's entries came from. LoRA adapters of the target
// keep their initialisation. Nothing is copied unless everything fits.
Linearization copy_linearized_weights(const ModelConfig& source_config, const StateDict& source, LanguageModel& target);

}  // namespace linea::nn
