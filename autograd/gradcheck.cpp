#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/ops.h"
#include "tensor/transfer.h"

namespace linea::gradcheck {

namespace {

// Accumulates comparisons and remembers the worst one.
struct Tally {
  Result result;
  void compare(double analytic, double numeric, const std::string& where) {
    ++result.compared;
    const double error = std::isfinite(analytic) && std::isfinite(numeric)
                             ? std::abs(analytic - numeric) / std::max(1.0, std::abs(numeric))
                             : (analytic == numeric ? 0.0 : INFINITY);
    if (error > result.worst_error || (std::isnan(error) && !std::isnan(result.worst_error))) {
      result.worst_error = error;
      std::ostringstream os;
      os << where << ": analytic " << analytic << " vs numeric " << numeric;
      result.detail = os.str();
    }
  }
};

double dot(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0) return 0.0;
  return sum(mul(a, b)).item();
}

// f(inputs) evaluated without building a graph, as float64 on the host.
std::vector<double> evaluate(const Function& f, const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  return to(f(inputs), kCPU).to_vector<double>();
}

double dot_host(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

Result check(const Function& f, const std::vector<Tensor>& inputs_in, const Options& opt) {
  Tally tally;
  // Private contiguous float64 copies on the host-visible device: they are the leaves.
  std::vector<Tensor> inputs;
  int64_t total_in = 0;
  for (const Tensor& x : inputs_in) {
    LINEA_CHECK(x.defined() && x.dtype() == kFloat64, "gradcheck", "inputs must be float64 tensors, got ", x.describe());
    Tensor leaf = copy_to(detach(x), x.device());  // contiguous, with no graph behind it
    leaf.requires_grad_(true);
    inputs.push_back(leaf);
    total_in += x.numel();
  }

  const Tensor y = f(inputs);
  LINEA_CHECK(y.defined() && y.dtype() == kFloat64, "gradcheck", "the function must return a float64 tensor, got ",
              y.describe());
  const int64_t total_out = y.numel();
  if (!y.requires_grad()) {
    // The output does not depend on any input through autograd: every derivative must be zero.
    tally.result.detail = "output does not require grad";
  }

  Generator gen(opt.seed);
  std::vector<Tensor> cotangents;
  for (int k = 0; k < opt.cotangents; ++k) cotangents.push_back(randn(y.shape(), {kFloat64, y.device()}, &gen));

  // Analytic VJPs: one backward per cotangent.
  std::vector<std::vector<Tensor>> vjps;
  for (const Tensor& u : cotangents) {
    if (!y.requires_grad() || total_out == 0) {
      std::vector<Tensor> zeros_like_inputs;
      for (const Tensor& x : inputs) zeros_like_inputs.push_back(zeros_like(x));
      vjps.push_back(zeros_like_inputs);
      continue;
    }
    std::vector<Tensor> g = grad(y, inputs, u, /*retain_graph=*/true, /*allow_unused=*/true);
    for (size_t i = 0; i < g.size(); ++i)
      if (!g[i].defined()) g[i] = zeros_like(inputs[i]);
    vjps.push_back(g);
  }

  const bool per_element = total_in <= opt.max_perturbed;
  const bool full_jacobian = per_element && total_out * total_in <= opt.max_jacobian_entries && y.requires_grad();
  std::vector<std::vector<double>> u_host;
  for (const Tensor& u : cotangents) u_host.push_back(to(u, kCPU).to_vector<double>());

  if (per_element) {
    // Analytic Jacobian first, row by row: one backward with a one-hot cotangent per output.
    std::vector<std::vector<double>> analytic_rows;  // [output][input element, inputs in order]
    if (full_jacobian) {
      std::vector<double> onehot(total_out, 0.0);
      for (int64_t o = 0; o < total_out; ++o) {
        onehot[o] = 1.0;
        const Tensor e = to(from_vector(onehot, y.shape()), y.device());
        onehot[o] = 0.0;
        std::vector<Tensor> row = grad(y, inputs, e, true, true);
        std::vector<double> flat;
        for (size_t i = 0; i < inputs.size(); ++i) {
          const std::vector<double> r = row[i].defined() ? to(row[i], kCPU).to_vector<double>()
                                                         : std::vector<double>(inputs[i].numel(), 0.0);
          flat.insert(flat.end(), r.begin(), r.end());
        }
        analytic_rows.push_back(flat);
      }
    }
    // Then perturb one element at a time (on fresh copies: the leaves stay untouched); each pair
    // of evaluations serves every cotangent and one Jacobian column.
    int64_t column_index = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::vector<std::vector<double>> vjp_host;
      for (const auto& g : vjps) vjp_host.push_back(to(g[i], kCPU).to_vector<double>());
      std::vector<double> values = to(detach(inputs[i]), kCPU).to_vector<double>();
      std::vector<Tensor> shifted(inputs.size());
      for (size_t m = 0; m < inputs.size(); ++m) shifted[m] = detach(inputs[m]);
      for (int64_t j = 0; j < inputs[i].numel(); ++j, ++column_index) {
        const double original = values[j];
        auto evaluate_at = [&](double v) {
          values[j] = v;
          shifted[i] = to(from_vector(values, inputs[i].shape()), inputs[i].device());
          values[j] = original;
          return evaluate(f, shifted);
        };
        const std::vector<double> plus = evaluate_at(original + opt.eps);
        const std::vector<double> minus = evaluate_at(original - opt.eps);
        std::vector<double> column(total_out);
        for (int64_t o = 0; o < total_out; ++o) column[o] = (plus[o] - minus[o]) / (2 * opt.eps);
        for (size_t k = 0; k < cotangents.size(); ++k) {
          std::ostringstream where;
          where << "vjp " << k << ", input " << i << " element " << j;
          tally.compare(vjp_host[k][j], dot_host(u_host[k], column), where.str());
        }
        for (int64_t o = 0; full_jacobian && o < total_out; ++o) {
          std::ostringstream where;
          where << "jacobian[output " << o << "][input " << i << " element " << j << "]";
          tally.compare(analytic_rows[o][column_index], column[o], where.str());
        }
      }
    }
  } else {
    // Large inputs: directional derivatives u^T J v for random v, one pair of evaluations each.
    for (size_t k = 0; k < cotangents.size(); ++k) {
      for (int d = 0; d < opt.directions; ++d) {
        std::vector<Tensor> v, plus_in, minus_in;
        double analytic = 0;
        for (size_t i = 0; i < inputs.size(); ++i) {
          v.push_back(randn(inputs[i].shape(), {kFloat64, inputs[i].device()}, &gen));
          analytic += dot(vjps[k][i], v[i]);
          NoGradGuard no_grad;
          plus_in.push_back(detach(inputs[i]) + v[i] * opt.eps);
          minus_in.push_back(detach(inputs[i]) - v[i] * opt.eps);
        }
        const double numeric = (dot_host(u_host[k], evaluate(f, plus_in)) - dot_host(u_host[k], evaluate(f, minus_in))) /
                               (2 * opt.eps);
        std::ostringstream where;
        where << "vjp " << k << " along random direction " << d;
        tally.compare(analytic, numeric, where.str());
      }
    }
  }
  tally.result.passed = !(tally.result.worst_error > opt.tolerance) && !std::isnan(tally.result.worst_error);
  if (tally.result.compared == 0) tally.result.detail = "nothing to compare (zero-size inputs or output)";
  return tally.result;
}

}  // namespace linea::gradcheck
