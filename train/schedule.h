#pragma once
// Learning-rate schedules: a linear warmup from 0 to peak_lr over warmup_steps, then a decay to
// min_lr at total_steps (cosine, linear, or none), then min_lr. For step s (0-based, the step
// about to be taken) and the decay's progress q = (s - warmup_steps) / (total_steps - warmup_steps):
//
//   s <  warmup_steps   lr = peak_lr * s / warmup_steps
//   cosine              lr = min_lr + (peak_lr - min_lr) * (1 + cos(pi * q)) / 2
//   linear              lr = min_lr + (peak_lr - min_lr) * (1 - q)
//   constant            lr = peak_lr  (min_lr unused)
//   s >= total_steps    lr = min_lr  (constant: peak_lr)
//
// The warmup starts at exactly 0, as Hugging Face's schedules do: the first step only fills
// AdamW's moments.
#include <cstdint>
#include <string>

namespace linea::train {

enum class Decay { Cosine, Linear, Constant };

// "cosine", "linear", "constant"; anything else is an error listing these.
Decay parse_decay(const std::string& name);
const char* decay_name(Decay decay);

struct ScheduleOptions {
  double peak_lr = 3e-4;
  double min_lr = 0.0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;
  Decay decay = Decay::Cosine;
};

class LrSchedule {
 public:
  explicit LrSchedule(ScheduleOptions options);
  double operator()(int64_t step) const;
  const ScheduleOptions& options() const { return options_; }

 private:
  ScheduleOptions options_;
};

}  // namespace linea::train
