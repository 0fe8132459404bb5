#include "nn/recurrent/griffin.h"

#include "nn/layers/check.h"

namespace linea::nn {

GriffinBlock::GriffinBlock(const GriffinConfig& config, Generator& gen) : config_(config) {
  GriffinConfig& c = config_;
  check_positive(c.d_model, "d_model", "GriffinBlock");
  check_positive(c.conv_width, "conv_width", "GriffinBlock");
  LINEA_CHECK(c.lru.width >= 0, "GriffinBlock", "lru.width (D_rnn) must be >= 0 (0: d_model), got ", c.lru.width);
  if (c.lru.width == 0) c.lru.width = c.d_model;
  const int64_t D = c.d_model, R = c.lru.width;
  const LinearOptions proj{.bias = c.bias, .init = LinearInit::LeCunNormal};
  in_x = register_module("in_x", std::make_shared<Linear>(D, R, gen, proj));
  in_y = register_module("in_y", std::make_shared<Linear>(D, R, gen, proj));
  conv = register_module("conv", std::make_shared<CausalConv1D>(R, gen, c.conv_width));
  lru = register_module("lru", std::make_shared<RGLRU>(c.lru, gen));
  out = register_module("out", std::make_shared<Linear>(R, D, gen, proj));
}

Tensor GriffinBlock::mix(const Tensor& x, const Tensor& conv_state, Tensor* last_conv, const Tensor& h0,
                         Tensor* last_h) {
  const Tensor h = lru->forward(conv->forward(in_x->forward(x), conv_state, last_conv), h0, last_h);
  return out->forward(h * activate(in_y->forward(x), config_.activation));
}

Tensor GriffinBlock::forward(const Tensor& x) {
  check_sequence_input(x, config_.d_model, "GriffinBlock");
  return mix(x, Tensor(), nullptr, Tensor(), nullptr);
}

Tensor GriffinBlock::prefill(const Tensor& x, DecodeState& state_in) {
  GriffinState* s = &prefill_state<GriffinState>(x, state_in, config_.d_model, "GriffinBlock", &GriffinState::h);
  Tensor last_conv, last_h;
  const Tensor y = mix(x, s->conv, &last_conv, s->h, &last_h);
  s->conv = last_conv;
  s->h = last_h;
  s->position += x.size(1);
  own_storage(*s);
  return y;
}

std::unique_ptr<DecodeState> GriffinBlock::init_state(int64_t batch) const {
  auto s = std::make_unique<GriffinState>();
  s->conv = conv->init_state(batch);
  s->h = lru->init_state(batch);
  return s;
}

Tensor GriffinBlock::step(const Tensor& x, DecodeState& state_in) {
  GriffinState* s = &step_state<GriffinState>(x, state_in, config_.d_model, "GriffinBlock", &GriffinState::h);
  const Tensor h = lru->step(conv->step(in_x->forward(x), s->conv), s->h);
  ++s->position;
  return out->forward(h * activate(in_y->forward(x), config_.activation));
}

}  // namespace linea::nn
