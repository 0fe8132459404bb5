#pragma once
// The records of a training run that a plot shows, read from the trainer's DIR/log.jsonl:
//
//   {"kind":"step","step":120,"loss":2.31,"lr":0.0006,"tokens":245760,"time_s":81.6,...}
//   {"kind":"eval","step":100,"split":"valid","loss":2.45,"ppl":11.6}
//
// Records of other kinds (config, test, sample) and objects without a kind are skipped. A line
// that is not JSON, or a step or eval record without a numeric step and loss, is an error that
// names the file and the line. Two exceptions keep a live or crashed run plottable: an unfinished
// last line (no newline after it) that does not parse is left out and reported in
// unfinished_line, and a step logged twice (a resumed run redoing the steps after its checkpoint)
// counts once, by the record read last, the one the final model descends from. After a "resume"
// record, time_s (counted by each trainer process from its start) continues from the last step
// before it, so the time axis measures the run's training time across restarts.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace linea::plot {

struct StepRecord {
  int64_t step = 0;
  double loss = 0;
  double tokens = 0, time_s = 0;  // NaN when the record has none
  int64_t line = 0;               // in the log, for error messages
};

struct EvalRecord {
  int64_t step = 0;
  std::string split;  // "" when the record has none
  double loss = 0;
  double ppl = 0;  // NaN when the record has none
  int64_t line = 0;
};

struct RunLog {
  std::string name;  // the run directory's name: the legend shows it
  std::string path;  // of log.jsonl
  std::vector<StepRecord> steps;  // by step
  std::vector<EvalRecord> evals;  // by step
  int64_t unfinished_line = 0;    // the line left out as unfinished, 0 when none
};

// Parses the text of a log; source names it in errors ("runs/a/log.jsonl, line 3, ...").
RunLog parse_run_log(std::string_view text, const std::string& source);

// Reads RUN_DIR/log.jsonl (or a .jsonl file given directly). An unreadable file, or one with
// neither step nor eval records, is an error naming it.
RunLog read_run_log(const std::string& run);

}  // namespace linea::plot
