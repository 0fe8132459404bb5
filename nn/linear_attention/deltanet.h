#pragma once
// DeltaNet (Schlag et al. 2021; docs/math.md#deltanet): linear attention whose state is
// updated by the delta rule, so writing a value under a key first erases what that key held.
// Per head, with phi a feature map followed by L2 normalization (so |k| <= 1):
//
//   q, k = l2norm(phi(W_q x)), l2norm(phi(W_k x));   v = W_v x;   beta = sigmoid(w_b.x + b)
//   S_t = S_{t-1} - beta_t S_{t-1} k_t k_t^T + beta_t v_t k_t^T
//       = S_{t-1} + beta_t (v_t - S_{t-1} k_t) k_t^T              (S: dv x dk)
//   o_t = S_t q_t
//   y_t = W_o merge_heads(Norm(o_t))                              per-head RMSNorm (optional)
//
// With |k| <= 1 and beta in (0, 1), I - beta k k^T is a contraction, so the state never grows
// past what the values put in.
//
// Two forms, as every mixer (nn/mixer.h):
//   chunked_delta_rule   the parallel form (Yang et al. 2024, "Parallelizing Linear Transformers
//                        with the Delta Rule over Sequence Length"): within a chunk of C tokens
//                        the product of the C rank-one updates is written in the WY / UT form,
//                        which needs the inverse of one unit lower-triangular C x C matrix; the
//                        chunks are then chained by an N-step loop over C x d matrices. Memory
//                        O(T (dk + dv + C)) per head: no T x T tensor. The derivation is in
//                        deltanet.cpp.
//   delta_rule_step      the recurrent form: one token, the state (dv x dk) in and out.
//
// Choices the papers leave open (following Yang et al.'s DeltaNet layer): phi is SiLU by
// default (identity as an option), q is L2-normalized like k and not scaled further, beta has
// one value per head, the output goes through a per-head RMSNorm with a gain shared by the heads,
// projections start Xavier-uniform (beta's Linear keeps PyTorch's default). The short
// convolutions on q, k, v of that layer are left out.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/layers/linear.h"
#include "nn/layers/norm.h"
#include "nn/mixer.h"

namespace linea::nn::linear {

enum class DeltaFeatureMap { Identity, Silu };

struct DeltaNetConfig {
  int64_t d_model = 0;
  int64_t heads = 1;
  int64_t head_dim = 0;  // dk = dv per head; 0: d_model / heads
  DeltaFeatureMap feature_map = DeltaFeatureMap::Silu;
  double l2_eps = 1e-6;      // l2norm(z) = z / sqrt(|z|^2 + eps)
  bool output_norm = true;   // per-head RMSNorm on o before the heads are merged
  double output_norm_eps = 1e-6;
  int64_t chunk_size = 64;   // C of the parallel form: a power of two
  bool projection_bias = false;
};

std::string delta_feature_map_name(DeltaFeatureMap map);  // "identity", "silu"
DeltaFeatureMap parse_delta_feature_map(const std::string& name);

// The parallel form. q, k (B, H, T, dk); v (B, H, T, dv); beta (B, H, T, 1); initial_state
// (B, H, dv, dk) or undefined (zeros). Returns o (B, H, T, dv); *final_state receives S_T.
// chunk_size is a power of two (chunks shorter than that are used when T is).
Tensor chunked_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta,
                          const Tensor& initial_state = Tensor(), Tensor* final_state = nullptr,
                          int64_t chunk_size = 64);

// One step: q, k (B, H, dk); v (B, H, dv); beta (B, H, 1); state (B, H, dv, dk) or undefined
// (zeros), replaced by S_t. Returns o_t (B, H, dv).
Tensor delta_rule_step(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta, Tensor& state);

struct DeltaNetState : DecodeState {
  Tensor state;  // (B, H, dv, dk)
  std::vector<std::pair<std::string, Tensor*>> members() override { return {{"state", &state}}; }
};

class DeltaNet : public SequenceMixer {
 public:
  DeltaNet(const DeltaNetConfig& config, Generator& gen);

  Tensor forward(const Tensor& x) override;  // chunked_delta_rule from S = 0: (B, T, D) -> (B, T, D)
  std::unique_ptr<DecodeState> init_state(int64_t batch) const override;  // S = 0, (B, H, dv, dk)
  Tensor step(const Tensor& x, DecodeState& state) override;  // delta_rule_step: (B, D) -> (B, D)
  Tensor prefill(const Tensor& x, DecodeState& state) override;  // chunked_delta_rule from S, keeping the last S

  const DeltaNetConfig& config() const { return config_; }

  std::shared_ptr<Linear> q_proj, k_proj, v_proj, beta_proj, out_proj;
  std::shared_ptr<HeadNorm> norm;  // null without an output norm

 private:
  struct Projected {
    Tensor q, k, v, beta;  // (B, H, T, .)
  };
  Projected project(const Tensor& x) const;
  Tensor finish(const Tensor& o) const;  // (B, H, T, dv) -> (B, T, D)

  DeltaNetConfig config_;
};

}  // namespace linea::nn::linear
