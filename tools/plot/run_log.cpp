#include "tools/plot/run_log.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "nn/json.h"
#include "tensor/error.h"
#include "train/file_io.h"

namespace linea::plot {

namespace {

// The record's number under key, NaN when absent or null; any other kind is an error.
double optional_number(const json::Value& record, const char* key, const std::string& where) {
  const json::Value* v = json::find(record, key);
  if (v == nullptr || v->is_null()) return NAN;
  LINEA_CHECK(v->is_number(), "plot", where, ": '", key, "' must be a number, got ", v->type_name());
  return v->get<double>();
}

double required_number(const json::Value& record, const char* key, const std::string& where) {
  const json::Value* v = json::find(record, key);
  LINEA_CHECK(v != nullptr, "plot", where, ": the record has no '", key, "'");
  return optional_number(record, key, where);
}

int64_t required_step(const json::Value& record, const std::string& where) {
  const double step = required_number(record, "step", where);
  LINEA_CHECK(std::isfinite(step) && step >= 0 && step == std::floor(step) && step < 9e15, "plot", where,
              ": 'step' must be a non-negative integer, got ", step);
  return static_cast<int64_t>(step);
}

// The values of a map in key order: the records by step, the last one read for each step.
template <class Key, class Record>
std::vector<Record> in_order(const std::map<Key, Record>& by_key) {
  std::vector<Record> out;
  for (const auto& [key, record] : by_key) out.push_back(record);
  return out;
}

// The line number of text's last line when it is unfinished (no newline after it) and does not
// parse: a run that is writing it now, or one killed halfway through it. 0 otherwise.
int64_t unfinished_last_line(std::string_view text) {
  const size_t last_newline = text.rfind('\n');
  const std::string_view tail = last_newline == std::string_view::npos ? text : text.substr(last_newline + 1);
  if (tail.find_first_not_of(" \t\r") == std::string_view::npos) return 0;
  try {
    json::parse(tail);
    return 0;
  } catch (const Error&) {
    return std::count(text.begin(), text.end(), '\n') + 1;
  }
}

}  // namespace

RunLog parse_run_log(std::string_view text, const std::string& source) {
  RunLog log;
  log.path = source;
  log.unfinished_line = unfinished_last_line(text);
  if (log.unfinished_line > 0) text = text.substr(0, text.rfind('\n') + 1);  // npos + 1 == 0: no line is whole
  // parse_lines reports a bad line with its number; the loop below pairs each record with its
  // line again (same rule for blank lines) so the checks of fields can name it too.
  const std::vector<json::Value> records = json::parse_lines(text, source);
  std::map<int64_t, StepRecord> steps;
  std::map<std::pair<int64_t, std::string>, EvalRecord> evals;
  // time_s counts from the start of the trainer's process, so a resumed run starts again near 0;
  // its times continue from the last step logged before the "resume" record instead.
  double time_offset = 0, last_time = 0;
  size_t next = 0;
  int64_t line = 1;
  for (size_t start = 0; start < text.size(); ++line) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view content = text.substr(start, end - start);
    start = end + 1;
    if (content.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const json::Value& record = records.at(next++);
    const std::string where = source + ", line " + std::to_string(line);
    LINEA_CHECK(record.is_object(), "plot", where, ": expected a JSON object, got ", record.type_name());
    const json::Value* kind_value = json::find(record, "kind");
    if (kind_value == nullptr || !kind_value->is_string()) continue;
    const std::string& kind = kind_value->get_ref<const std::string&>();
    if (kind == "step") {
      StepRecord r;
      r.step = required_step(record, where);
      r.loss = required_number(record, "loss", where);
      r.tokens = optional_number(record, "tokens", where);
      r.time_s = optional_number(record, "time_s", where) + time_offset;
      if (std::isfinite(r.time_s)) last_time = r.time_s;
      r.line = line;
      steps[r.step] = r;
    } else if (kind == "eval") {
      // An eval's own "tokens" is how many it evaluated, not how many training had seen.
      EvalRecord r;
      r.step = required_step(record, where);
      if (const json::Value* split = json::find(record, "split"); split != nullptr && split->is_string()) r.split = split->get<std::string>();
      r.loss = required_number(record, "loss", where);
      r.ppl = optional_number(record, "ppl", where);
      r.line = line;
      evals[{r.step, r.split}] = r;
    } else if (kind == "resume") {
      time_offset = last_time;
    }
  }
  log.steps = in_order(steps);
  log.evals = in_order(evals);
  return log;
}

RunLog read_run_log(const std::string& run) {
  namespace fs = std::filesystem;
  fs::path dir(run), file;
  std::error_code ec;
  LINEA_CHECK(fs::exists(dir, ec), "plot", "no run directory or log file at ", run);
  if (fs::is_directory(dir, ec)) {
    file = dir / "log.jsonl";
  } else {
    file = dir;
    dir = dir.parent_path();
  }
  LINEA_CHECK(fs::exists(file, ec), "plot", "no training log at ", file.string());
  RunLog log = parse_run_log(train::read_file(file.string(), "training log"), file.string());
  LINEA_CHECK(!log.steps.empty() || !log.evals.empty(), "plot", file.string(),
              ": no step or eval records (an empty log, or a run that has not logged a step yet)");
  // From the absolute path, so "runs/a/", "." and ".." all name the directory they mean.
  fs::path absolute = fs::absolute(dir, ec).lexically_normal();
  if (absolute.filename().empty()) absolute = absolute.parent_path();
  log.name = absolute.filename().string();
  return log;
}

}  // namespace linea::plot
