#include "train/progress.h"

#include <unistd.h>

#include <cmath>

namespace linea::train {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                               static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  else std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  return buf;
}

Progress::Progress(int64_t total_steps, int64_t every, std::FILE* out)
    : total_(total_steps), every_(every > 0 ? every : 1), out_(out), tty_(out != nullptr && isatty(fileno(out)) != 0) {}

void Progress::clear_bar() {
  if (tty_ && bar_shown_) std::fprintf(out_, "\r\033[K");
  bar_shown_ = false;
}

void Progress::step(int64_t step, double loss, double lr, double tokens_per_s, double seconds_left) {
  if (out_ == nullptr) return;
  if (!tty_ && step % every_ != 0 && step != total_) return;
  char line[256];
  if (tty_) {
    constexpr int kWidth = 24;
    const int filled = total_ > 0 ? static_cast<int>(kWidth * step / total_) : kWidth;
    std::string bar(kWidth, ' ');
    for (int i = 0; i < filled && i < kWidth; ++i) bar[i] = '=';
    if (filled < kWidth) bar[filled] = '>';
    std::snprintf(line, sizeof line, "\r\033[Kstep %5lld/%lld [%s] loss %.4f lr %.2e %.0f tok/s ETA %s",
                  static_cast<long long>(step), static_cast<long long>(total_), bar.c_str(), loss, lr, tokens_per_s,
                  format_duration(seconds_left).c_str());
    bar_shown_ = true;
  } else {
    std::snprintf(line, sizeof line, "step %lld/%lld loss %.4f lr %.2e %.0f tok/s ETA %s\n", static_cast<long long>(step),
                  static_cast<long long>(total_), loss, lr, tokens_per_s, format_duration(seconds_left).c_str());
  }
  std::fputs(line, out_);
  std::fflush(out_);
}

void Progress::message(const std::string& text) {
  if (out_ == nullptr) return;
  clear_bar();
  std::fprintf(out_, "%s\n", text.c_str());
  std::fflush(out_);
}

void Progress::finish() {
  if (tty_ && bar_shown_) std::fprintf(out_, "\n");
  bar_shown_ = false;
  if (out_ != nullptr) std::fflush(out_);
}

}  // namespace linea::train
