#pragma once
// Griffin's recurrent block (De et al. 2024; docs/math.md#griffin-recurrent-block), the
// temporal-mixing block that replaces attention in a Griffin layer (the residual structure and
// the MLP around it are nn/model.h's Block):
//
//   branch 1:  u = CausalConv1D(W_x x)   (width 4, per channel)  ->  h = RG-LRU(u)
//   branch 2:  g = GeLU(W_y x)
//   y = W_o (h * g)
//
//   x (B, T, D) -> two branches of width D_rnn -> (B, T, D)
//
// Choices: D_rnn defaults to D; the three projections have biases and start LeCun-normal (as in
// RecurrentGemma, without its depth-dependent scale on W_o); GeLU is the tanh approximation
// (RecurrentGemma's); the RG-LRU's gates are block-diagonal with `lru.heads` blocks (rg_lru.h).
//
// Decoding keeps the conv's last conv_width - 1 inputs and the RG-LRU's h: (B, 3, D_rnn) and
// (B, D_rnn), whatever the number of tokens seen. prefill runs forward's conv and scan from those
// and keeps the last ones.
#include <memory>

#include "nn/layers/conv1d.h"
#include "nn/layers/linear.h"
#include "nn/layers/mlp.h"
#include "nn/mixer.h"
#include "nn/recurrent/rg_lru.h"

namespace linea::nn {

struct GriffinConfig {
  int64_t d_model = 0;
  int64_t conv_width = 4;
  Activation activation = Activation::GeluTanh;  // on branch 2
  bool bias = true;                              // on W_x, W_y, W_o
  RGLRUConfig lru{};                             // lru.width is D_rnn (0: d_model)
};

struct GriffinState : DecodeState {
  Tensor conv;  // (B, conv_width - 1, D_rnn): the conv's last inputs
  Tensor h;     // (B, D_rnn): the RG-LRU's state
  std::vector<std::pair<std::string, Tensor*>> members() override { return {{"conv", &conv}, {"h", &h}}; }
};

class GriffinBlock : public SequenceMixer {
 public:
  GriffinBlock(const GriffinConfig& config, Generator& gen);

  Tensor forward(const Tensor& x) override;  // mix() from zeros: (B, T, D) -> (B, T, D)
  std::unique_ptr<DecodeState> init_state(int64_t batch) const override;  // conv's and lru's init_state
  Tensor step(const Tensor& x, DecodeState& state) override;  // one conv window, one RG-LRU step: (B, D) -> (B, D)
  Tensor prefill(const Tensor& x, DecodeState& state) override;  // mix() from the state's conv inputs and h

  const GriffinConfig& config() const { return config_; }  // lru.width resolved
  int64_t width() const { return config_.lru.width; }

  std::shared_ptr<Linear> in_x, in_y, out;  // W_x (branch 1), W_y (branch 2), W_o
  std::shared_ptr<CausalConv1D> conv;
  std::shared_ptr<RGLRU> lru;

 private:
  // The block over x (B, T, D) from the conv's past inputs and the RG-LRU's h (undefined: zeros);
  // last_conv and last_h, when given, receive the ones after the T tokens.
  Tensor mix(const Tensor& x, const Tensor& conv_state, Tensor* last_conv, const Tensor& h0, Tensor* last_h);

  GriffinConfig config_;
};

}  // namespace linea::nn
