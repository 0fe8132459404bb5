#pragma once
// Progress of a long job. On a terminal, one line redrawn in place:
//   step  120/600 [=======>              ] loss 2.3107 lr 6.00e-04 3,012 tok/s ETA 2:41
// Otherwise (a pipe, a CI log) a plain line every `every` steps, so logs stay readable.
#include <cstdint>
#include <cstdio>
#include <string>

namespace linea::train {

class Progress {
 public:
  // A null `out` prints nothing (the ranks of a data-parallel run other than rank 0).
  Progress(int64_t total_steps, int64_t every, std::FILE* out = stderr);
  // Reports a finished step; seconds_left is the estimated time to the end.
  void step(int64_t step, double loss, double lr, double tokens_per_s, double seconds_left);
  // Prints a line of its own (clearing the bar first on a terminal).
  void message(const std::string& text);
  void finish();

 private:
  void clear_bar();
  int64_t total_, every_;
  std::FILE* out_;
  bool tty_;
  bool bar_shown_ = false;
};

// "2:41", "1:02:03".
std::string format_duration(double seconds);

}  // namespace linea::train
