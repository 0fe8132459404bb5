#pragma once
// The CPU implementation of the kernel set (tensor/backend.h). Its member functions are defined
// by family: elementwise.cpp (with ReGLA's refined gate), reduce.cpp, matmul.cpp (OpenBLAS),
// indexing.cpp, softmax.cpp, norm.cpp, random.cpp, attention.cpp (with AdamW), gated_scan.cpp,
// normalized_exp.cpp. Kernels are templates over the element type, instantiated for float and
// double through dispatch_floating.
#include "tensor/backend.h"

namespace linea::cpu {

class CpuBackend final : public Backend {
 public:
  void fill(const Tensor& out, double value) const override;
  void arange(const Tensor& out, double start, double step) const override;
  void copy(const Tensor& src, const Tensor& dst) const override;
  void unary(UnaryOp op, const Tensor& in, const Tensor& out, UnaryArgs args) const override;
  void unary_grad(UnaryOp derivative, const Tensor& x, const Tensor& dy, const Tensor& out,
                  UnaryArgs args) const override;
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) const override;
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) const override;
  void rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& y) const override;
  void reduce(ReduceOp op, const Tensor& in, const std::vector<int64_t>& dims,
              const Tensor& out) const override;
  void cumsum(const Tensor& in, int64_t dim, bool reverse, const Tensor& out) const override;
  void matmul(const Tensor& a, const Tensor& b, const Tensor& out) const override;
  void index_select(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) const override;
  void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) const override;
  void gather(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) const override;
  void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) const override;
  void softmax(const Tensor& x, int64_t dim, bool log, const Tensor& y) const override;
  void softmax_backward(const Tensor& y, const Tensor& dy, int64_t dim, bool log,
                        const Tensor& dx) const override;
  void cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                     const Tensor& losses, const Tensor& lse) const override;
  void cross_entropy_backward(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                              const Tensor& lse, const Tensor& dloss, const Tensor& dlogits) const override;
  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                  const Tensor& y, const Tensor& mean, const Tensor& rstd) const override;
  void layer_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& mean,
                           const Tensor& rstd, const Tensor& dy, const Tensor& dx,
                           const Tensor& dweight, const Tensor& dbias) const override;
  void rms_norm(const Tensor& x, const Tensor& weight, double eps, const Tensor& y,
                const Tensor& rstd) const override;
  void rms_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& rstd,
                         const Tensor& dy, const Tensor& dx, const Tensor& dweight) const override;
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, int64_t window,
                 const Tensor& out, const Tensor& lse) const override;
  void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                          const Tensor& lse, const Tensor& dout, double scale, int64_t window,
                          const Tensor& dq, const Tensor& dk, const Tensor& dv) const override;
  void normalized_exp(const Tensor& x, NormalizedExpMode mode, double scale, const Tensor& previous, const Tensor& y,
                      const Tensor& m) const override;
  void normalized_exp_backward(const Tensor& x, const Tensor& y, const Tensor& m, const Tensor& previous,
                               const Tensor& dy, const Tensor& dm, NormalizedExpMode mode, const Tensor& dx,
                               const Tensor& dprevious) const override;
  void refined_log_gate(const Tensor& a, const Tensor& c, double floor, const Tensor& out) const override;
  void refined_log_gate_backward(const Tensor& a, const Tensor& c, double floor, const Tensor& dout, const Tensor& da,
                                 const Tensor& dc) const override;
  void gated_scan(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk, const Tensor& gv,
                  const Tensor& initial_state, const Tensor& out, const Tensor& final_state,
                  ScanAlgorithm algorithm) const override;
  void gated_scan_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk, const Tensor& gv,
                           const Tensor& initial_state, const Tensor& dout, const Tensor& dfinal_state,
                           const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dgk,
                           const Tensor& dgv, const Tensor& dinitial_state,
                           ScanAlgorithm algorithm) const override;
  void sum_squares(const std::vector<Tensor>& xs, const Tensor& out) const override;
  void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                  const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                  const std::vector<bool>& decay, const AdamWHyper& hyper) const override;
  void uniform(const Tensor& out, uint64_t seed, uint64_t offset, double low, double high) const override;
  void normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double stddev) const override;
};

const Backend& cpu_backend();

// Many kernels work on a contiguous tensor viewed as (outer, size along dim, inner).
struct DimSplit {
  int64_t outer = 1, size = 1, inner = 1;
};
DimSplit split_at(const Shape& shape, int64_t dim);

// `t` itself when contiguous, else a contiguous copy (same device and dtype).
Tensor contiguous_copy(const Tensor& t);

}  // namespace linea::cpu
