// Elementwise CPU kernels: fill, arange, copy (with dtype conversion), unary, binary, where, and
// ReGLA's refined gate with its backward. unary, unary_grad and binary take bfloat16 too, each
// element computed in float32 and rounded once (compute_t).
#include <cmath>

#include "cpu/cpu_backend.h"
#include "cpu/strided_loop.h"
#include "tensor/scalar_math.h"
#include "tensor/view.h"

namespace linea::cpu {

namespace {

// out[i] = f(in[i]) over out's shape, in and out of element types In and Out, f taking and giving
// C (a bfloat16 element is widened to float and f's result rounded once: compute_t).
template <class In, class Out, class C = In, class F>
void map1(const Tensor& in, const Tensor& out, F f) {
  const In* src = in.data<In>();
  Out* dst = out.data<Out>();
  for_each_run<2>(out.shape(), {&out.strides(), &in.strides()},
                  [&](const std::array<int64_t, 2>& at, int64_t n, const std::array<int64_t, 2>& step) {
                    Out* o = dst + at[0];
                    const In* x = src + at[1];
                    if (step[0] == 1 && step[1] == 1) {
                      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(f(static_cast<C>(x[i])));
                    } else {
                      for (int64_t i = 0; i < n; ++i) o[i * step[0]] = static_cast<Out>(f(static_cast<C>(x[i * step[1]])));
                    }
                  });
}

// out[i] = f(a[i], b[i]), f taking C as map1's.
template <class In, class Out, class C = In, class F>
void map2(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  const In* pa = a.data<In>();
  const In* pb = b.data<In>();
  Out* dst = out.data<Out>();
  for_each_run<3>(out.shape(), {&out.strides(), &a.strides(), &b.strides()},
                  [&](const std::array<int64_t, 3>& at, int64_t n, const std::array<int64_t, 3>& step) {
                    Out* o = dst + at[0];
                    const In* x = pa + at[1];
                    const In* y = pb + at[2];
                    auto wide = [](const In* p, int64_t i) { return static_cast<C>(p[i]); };
                    if (step[0] == 1 && step[1] == 1 && step[2] == 1) {
                      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(f(wide(x, i), wide(y, i)));
                    } else if (step[0] == 1 && step[1] == 1 && step[2] == 0) {  // tensor op scalar
                      const C yv = wide(y, 0);
                      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(f(wide(x, i), yv));
                    } else {
                      for (int64_t i = 0; i < n; ++i)
                        o[i * step[0]] = static_cast<Out>(f(wide(x, i * step[1]), wide(y, i * step[2])));
                    }
                  });
}

template <class T>
void unary_typed(UnaryOp op, const Tensor& in, const Tensor& out, UnaryArgs args) {
  using namespace scalar;
  using C = compute_t<T>;
  const C a = static_cast<C>(args.a), b = static_cast<C>(args.b);
  switch (op) {
    case UnaryOp::Neg: return map1<T, T, C>(in, out, [](C x) { return -x; });
    case UnaryOp::Exp: return map1<T, T, C>(in, out, [](C x) { return std::exp(x); });
    case UnaryOp::Log: return map1<T, T, C>(in, out, [](C x) { return std::log(x); });
    case UnaryOp::Sqrt: return map1<T, T, C>(in, out, [](C x) { return std::sqrt(x); });
    case UnaryOp::Rsqrt: return map1<T, T, C>(in, out, [](C x) { return C(1) / std::sqrt(x); });
    case UnaryOp::Abs: return map1<T, T, C>(in, out, [](C x) { return std::abs(x); });
    case UnaryOp::Sin: return map1<T, T, C>(in, out, [](C x) { return std::sin(x); });
    case UnaryOp::Cos: return map1<T, T, C>(in, out, [](C x) { return std::cos(x); });
    case UnaryOp::Tanh: return map1<T, T, C>(in, out, [](C x) { return std::tanh(x); });
    case UnaryOp::Sigmoid: return map1<T, T, C>(in, out, [](C x) { return sigmoid(x); });
    case UnaryOp::LogSigmoid: return map1<T, T, C>(in, out, [](C x) { return log_sigmoid(x); });
    case UnaryOp::Softplus: return map1<T, T, C>(in, out, [](C x) { return softplus(x); });
    case UnaryOp::Relu: return map1<T, T, C>(in, out, [](C x) { return x > C(0) ? x : C(0); });
    case UnaryOp::Elu: return map1<T, T, C>(in, out, [a](C x) { return elu(x, a); });
    case UnaryOp::GeluTanh: return map1<T, T, C>(in, out, [](C x) { return gelu_tanh(x); });
    case UnaryOp::GeluErf: return map1<T, T, C>(in, out, [](C x) { return gelu_erf(x); });
    case UnaryOp::Silu: return map1<T, T, C>(in, out, [](C x) { return silu(x); });
    case UnaryOp::Pow: return map1<T, T, C>(in, out, [a](C x) { return std::pow(x, a); });
    case UnaryOp::Clamp: return map1<T, T, C>(in, out, [a, b](C x) { return x < a ? a : (x > b ? b : x); });
    case UnaryOp::Sign: return map1<T, T, C>(in, out, [](C x) { return sign(x); });
    case UnaryOp::Reciprocal: return map1<T, T, C>(in, out, [](C x) { return C(1) / x; });
    case UnaryOp::Square: return map1<T, T, C>(in, out, [](C x) { return x * x; });
    case UnaryOp::Log1p: return map1<T, T, C>(in, out, [](C x) { return std::log1p(x); });
    case UnaryOp::Expm1: return map1<T, T, C>(in, out, [](C x) { return std::expm1(x); });
    case UnaryOp::Erf: return map1<T, T, C>(in, out, [](C x) { return std::erf(x); });
    case UnaryOp::Step: return map1<T, T, C>(in, out, [](C x) { return x > C(0) ? C(1) : C(0); });
    case UnaryOp::GeluTanhGrad: return map1<T, T, C>(in, out, [](C x) { return gelu_tanh_grad(x); });
    case UnaryOp::GeluErfGrad: return map1<T, T, C>(in, out, [](C x) { return gelu_erf_grad(x); });
    case UnaryOp::EluGrad: return map1<T, T, C>(in, out, [a](C x) { return elu_grad(x, a); });
  }
}

template <class T>
void arithmetic_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  using namespace scalar;
  using C = compute_t<T>;
  switch (op) {
    case BinaryOp::Add: return map2<T, T, C>(a, b, out, [](C x, C y) { return x + y; });
    case BinaryOp::Sub: return map2<T, T, C>(a, b, out, [](C x, C y) { return x - y; });
    case BinaryOp::Mul: return map2<T, T, C>(a, b, out, [](C x, C y) { return x * y; });
    case BinaryOp::Div: return map2<T, T, C>(a, b, out, [](C x, C y) { return x / y; });
    case BinaryOp::Pow: return map2<T, T, C>(a, b, out, [](C x, C y) { return std::pow(x, y); });
    case BinaryOp::Maximum: return map2<T, T, C>(a, b, out, [](C x, C y) { return max_nan(x, y); });
    case BinaryOp::Minimum: return map2<T, T, C>(a, b, out, [](C x, C y) { return min_nan(x, y); });
    default: fail("binary", "not an arithmetic op");
  }
}

template <class T>
void compare_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  switch (op) {
    case BinaryOp::Eq: return map2<T, bool>(a, b, out, [](T x, T y) { return x == y; });
    case BinaryOp::Ne: return map2<T, bool>(a, b, out, [](T x, T y) { return x != y; });
    case BinaryOp::Lt: return map2<T, bool>(a, b, out, [](T x, T y) { return x < y; });
    case BinaryOp::Le: return map2<T, bool>(a, b, out, [](T x, T y) { return x <= y; });
    case BinaryOp::Gt: return map2<T, bool>(a, b, out, [](T x, T y) { return x > y; });
    case BinaryOp::Ge: return map2<T, bool>(a, b, out, [](T x, T y) { return x >= y; });
    default: fail("binary", "not a comparison");
  }
}

}  // namespace

void CpuBackend::fill(const Tensor& out, double value) const {
  dispatch_all(out.dtype(), [&]<class T>() {
    const T v = static_cast<T>(value);
    T* dst = out.data<T>();
    for_each_run<1>(out.shape(), {&out.strides()},
                    [&](const std::array<int64_t, 1>& at, int64_t n, const std::array<int64_t, 1>& step) {
                      for (int64_t i = 0; i < n; ++i) dst[at[0] + i * step[0]] = v;
                    });
  });
}

void CpuBackend::arange(const Tensor& out, double start, double step) const {
  dispatch_all(out.dtype(), [&]<class T>() {
    T* dst = out.data<T>();
    const int64_t stride = out.dim() ? out.stride(0) : 1;
    for (int64_t i = 0; i < out.numel(); ++i) dst[i * stride] = static_cast<T>(start + step * static_cast<double>(i));
  });
}

void CpuBackend::copy(const Tensor& src, const Tensor& dst) const {
  dispatch_all(src.dtype(), [&]<class In>() {
    dispatch_all(dst.dtype(), [&]<class Out>() {
      map1<In, Out>(src, dst, [](In x) { return static_cast<Out>(x); });
    });
  });
}

void CpuBackend::unary(UnaryOp op, const Tensor& in, const Tensor& out, UnaryArgs args) const {
  dispatch_floating_or_bf16(in.dtype(), "unary", [&]<class T>() { unary_typed<T>(op, in, out, args); });
}

void CpuBackend::unary_grad(UnaryOp derivative, const Tensor& x, const Tensor& dy, const Tensor& out,
                            UnaryArgs args) const {
  dispatch_floating_or_bf16(x.dtype(), "unary_grad", [&]<class T>() {
    using namespace scalar;
    using C = compute_t<T>;
    const C a = static_cast<C>(args.a);
    switch (derivative) {
      case UnaryOp::Step: return map2<T, T, C>(x, dy, out, [](C x, C g) { return g * (x > C(0) ? C(1) : C(0)); });
      case UnaryOp::GeluTanhGrad: return map2<T, T, C>(x, dy, out, [](C x, C g) { return g * gelu_tanh_grad(x); });
      case UnaryOp::GeluErfGrad: return map2<T, T, C>(x, dy, out, [](C x, C g) { return g * gelu_erf_grad(x); });
      case UnaryOp::EluGrad: return map2<T, T, C>(x, dy, out, [a](C x, C g) { return g * elu_grad(x, a); });
      default: fail("unary_grad", "op ", static_cast<int>(derivative), " is not a derivative helper");
    }
  });
}

void CpuBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) const {
  if (op == BinaryOp::And || op == BinaryOp::Or) {
    if (op == BinaryOp::And) map2<bool, bool>(a, b, out, [](bool x, bool y) { return x && y; });
    else map2<bool, bool>(a, b, out, [](bool x, bool y) { return x || y; });
    return;
  }
  if (is_comparison(op)) {
    dispatch_all(a.dtype(), [&]<class T>() { compare_typed<T>(op, a, b, out); });
    return;
  }
  dispatch_floating_or_bf16(a.dtype(), "binary", [&]<class T>() { arithmetic_typed<T>(op, a, b, out); });
}

void CpuBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) const {
  dispatch_all(out.dtype(), [&]<class T>() {
    const bool* c = cond.data<bool>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* dst = out.data<T>();
    for_each_run<4>(out.shape(), {&out.strides(), &cond.strides(), &a.strides(), &b.strides()},
                    [&](const std::array<int64_t, 4>& at, int64_t n, const std::array<int64_t, 4>& s) {
                      for (int64_t i = 0; i < n; ++i)
                        dst[at[0] + i * s[0]] = c[at[1] + i * s[1]] ? pa[at[2] + i * s[2]] : pb[at[3] + i * s[3]];
                    });
  });
}

void CpuBackend::refined_log_gate(const Tensor& a, const Tensor& c, const Tensor& bias_a, const Tensor& bias_c,
                                  double floor, const Tensor& out) const {
  dispatch_floating(a.dtype(), "refined_log_gate", [&]<class T>() {
    const T lo = static_cast<T>(floor);
    const T *pa = a.data<T>(), *pc = c.data<T>(), *pba = bias_a.data<T>(), *pbc = bias_c.data<T>();
    T* dst = out.data<T>();
    for_each_run<5>(out.shape(), {&out.strides(), &a.strides(), &c.strides(), &bias_a.strides(), &bias_c.strides()},
                    [&](const std::array<int64_t, 5>& at, int64_t n, const std::array<int64_t, 5>& s) {
                      for (int64_t i = 0; i < n; ++i) {
                        const T x = pa[at[1] + i * s[1]] + pba[at[3] + i * s[3]];
                        const T y = pc[at[2] + i * s[2]] + pbc[at[4] + i * s[4]];
                        const T v = scalar::refined_log_gate(x, y).value;
                        dst[at[0] + i * s[0]] = v < lo ? lo : v;
                      }
                    });
  });
}

void CpuBackend::refined_log_gate_backward(const Tensor& a, const Tensor& c, const Tensor& bias_a,
                                           const Tensor& bias_c, double floor, const Tensor& dout, const Tensor& da,
                                           const Tensor& dc) const {
  dispatch_floating(a.dtype(), "refined_log_gate_backward", [&]<class T>() {
    const T lo = static_cast<T>(floor);
    const T *pa = a.data<T>(), *pc = c.data<T>(), *pba = bias_a.data<T>(), *pbc = bias_c.data<T>();
    const T* pg = dout.data<T>();
    T *pda = da.data<T>(), *pdc = dc.data<T>();
    for_each_run<7>(a.shape(),
                    {&a.strides(), &c.strides(), &bias_a.strides(), &bias_c.strides(), &dout.strides(), &da.strides(),
                     &dc.strides()},
                    [&](const std::array<int64_t, 7>& at, int64_t n, const std::array<int64_t, 7>& s) {
                      for (int64_t i = 0; i < n; ++i) {
                        const auto f = scalar::refined_log_gate(pa[at[0] + i * s[0]] + pba[at[2] + i * s[2]],
                                                                pc[at[1] + i * s[1]] + pbc[at[3] + i * s[3]]);
                        const T g = f.value > lo ? pg[at[4] + i * s[4]] : T(0);  // clamp's rule: 0 on the floor
                        pda[at[5] + i * s[5]] = g * f.d_a;
                        pdc[at[6] + i * s[6]] = g * f.d_c;
                      }
                    });
  });
}

// The pairs as six same-shaped views (cos and sin broadcast over the leading dims), through the
// elementwise loop. bfloat16 x and y: the tables in float32 (compute_t), each pair rotated in
// float32 and rounded once.
void CpuBackend::rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& y) const {
  const int64_t half = cos.size(1), dh = x.size(-1), last = x.dim() - 1;
  Shape pair_shape = x.shape();
  pair_shape.back() = half;
  const Tensor x1 = views::slice(x, last, 0, half, 1), x2 = views::slice(x, last, half, 2 * half, 1);
  const Tensor y1 = views::slice(y, last, 0, half, 1), y2 = views::slice(y, last, half, 2 * half, 1);
  const Tensor c = views::expand(cos, pair_shape), s = views::expand(sin, pair_shape);
  if (2 * half < dh) copy(views::slice(x, last, 2 * half, dh, 1), views::slice(y, last, 2 * half, dh, 1));
  dispatch_floating_or_bf16(y.dtype(), "rotary", [&]<class T>() {
    using C = compute_t<T>;
    const T *pa = x1.data<T>(), *pb = x2.data<T>();
    const C *pc = c.data<C>(), *ps = s.data<C>();
    T *pu = y1.data<T>(), *pw = y2.data<T>();
    const C sign = inverse ? C(-1) : C(1);
    for_each_run<6>(pair_shape, {&x1.strides(), &x2.strides(), &c.strides(), &s.strides(), &y1.strides(), &y2.strides()},
                    [&](const std::array<int64_t, 6>& at, int64_t n, const std::array<int64_t, 6>& step) {
                      for (int64_t i = 0; i < n; ++i) {
                        C u, w;
                        scalar::rotate_pair(static_cast<C>(pa[at[0] + i * step[0]]),
                                            static_cast<C>(pb[at[1] + i * step[1]]), pc[at[2] + i * step[2]],
                                            sign * ps[at[3] + i * step[3]], u, w);
                        pu[at[4] + i * step[4]] = static_cast<T>(u);
                        pw[at[5] + i * step[5]] = static_cast<T>(w);
                      }
                    });
  });
}

}  // namespace linea::cpu
