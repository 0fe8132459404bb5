#pragma once
// Whole-model gradient checks: the global L2 norm (what clipping and the training log use), clipping
// by it, and a finiteness test. Parameters without a gradient are skipped. Each reduces every
// gradient on its device in float64 and copies one number to the host, so a CUDA model pays one
// synchronisation per call, not one per parameter.
#include <vector>

#include "tensor/tensor.h"

namespace linea::train {

// sqrt(sum of g^2 over every element of every gradient), accumulated in float64 so that float32
// gradients neither overflow when squared nor lose small terms. Non-finite when any gradient is.
double grad_norm(const std::vector<Tensor>& params);
// Its square, queued on the gradients' device and not read: a float64 scalar tensor (undefined
// when no parameter has a gradient). A training step queues it before it reads the loss, so that
// one wait for the device serves both (train_step.cpp).
Tensor grad_norm_squared(const std::vector<Tensor>& params);
// The norm from that square, read from its device (a wait); 0 for an undefined one (no gradient).
double read_norm(const Tensor& norm_squared);

struct ClipResult {
  double norm = 0.0;     // before clipping
  bool finite = true;    // false: the gradients hold inf or NaN (or float64 values so large
                         //        that their squares overflow) and were left untouched;
                         //        the caller should skip the step (and log it)
  bool clipped = false;  // true: the gradients were (or are to be) scaled by max_norm / norm
  double scale = 1.0;    // max_norm / norm when clipped, else 1
};

// What clipping by the global norm decides, without touching the gradients: a training step
// hands result.scale to Optimizer::step, which applies it as it reads them (no pass of its own).
// max_norm <= 0 means no clipping; a non-finite norm clips nothing and says so.
ClipResult plan_clip(double max_norm, double norm);

// Scales every gradient by max_norm / norm when the norm exceeds max_norm (max_norm > 0), so the
// new norm is max_norm; PyTorch's clip_grad_norm_ does the same up to its 1e-6 guard.
ClipResult clip_grad_norm(const std::vector<Tensor>& params, double max_norm);
// The same with the gradients' norm already known: plan_clip, then the scaling of every gradient.
ClipResult clip_by_norm(const std::vector<Tensor>& params, double max_norm, double norm);

// True when no gradient holds inf or NaN.
bool grads_finite(const std::vector<Tensor>& params);

}  // namespace linea::train
