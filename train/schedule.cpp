#include "train/schedule.h"

#include <cmath>
#include <numbers>

#include "tensor/error.h"

namespace linea::train {

Decay parse_decay(const std::string& name) {
  for (Decay d : {Decay::Cosine, Decay::Linear, Decay::Constant})
    if (name == decay_name(d)) return d;
  fail("schedule", "unknown decay '", name, "' (expected cosine, linear or constant)");
}

const char* decay_name(Decay decay) {
  switch (decay) {
    case Decay::Cosine: return "cosine";
    case Decay::Linear: return "linear";
    case Decay::Constant: return "constant";
  }
  return "?";
}

LrSchedule::LrSchedule(ScheduleOptions options) : options_(options) {
  const ScheduleOptions& o = options_;
  LINEA_CHECK(std::isfinite(o.peak_lr) && std::isfinite(o.min_lr) && o.min_lr >= 0 && o.min_lr <= o.peak_lr,
              "schedule", "need 0 <= min_lr <= peak_lr, got min_lr ", o.min_lr, " and peak_lr ", o.peak_lr);
  LINEA_CHECK(o.warmup_steps >= 0 && o.warmup_steps <= o.total_steps, "schedule",
              "need 0 <= warmup_steps <= total_steps, got ", o.warmup_steps, " and ", o.total_steps);
}

double LrSchedule::operator()(int64_t step) const {
  const ScheduleOptions& o = options_;
  LINEA_CHECK(step >= 0, "schedule", "negative step ", step);
  if (step < o.warmup_steps) return o.peak_lr * static_cast<double>(step) / static_cast<double>(o.warmup_steps);
  if (o.decay == Decay::Constant) return o.peak_lr;
  if (step >= o.total_steps) return o.min_lr;
  const double q = static_cast<double>(step - o.warmup_steps) / static_cast<double>(o.total_steps - o.warmup_steps);
  const double shape = o.decay == Decay::Cosine ? 0.5 * (1.0 + std::cos(std::numbers::pi * q)) : 1.0 - q;
  return o.min_lr + (o.peak_lr - o.min_lr) * shape;
}

}  // namespace linea::train
