#include "train/run_log.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "train/file_io.h"

namespace linea::train {

RunLog::RunLog(const std::string& path, int64_t keep_through_step) : path_(path) {
  namespace fs = std::filesystem;
  if (keep_through_step >= 0 && fs::exists(path)) {
    std::istringstream in(read_file(path, "run log"));
    std::string kept, line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      json::Value record;
      try {
        record = json::parse(line);
      } catch (const Error&) {
        break;  // a line cut short by a crash ends what can be trusted
      }
      const json::Value* step = json::find(record, "step");
      if (step && step->is_number() && json::as<int64_t>(*step, "step") > keep_through_step) continue;
      kept += line + "\n";
    }
    write_file_atomically(path, kept);
  }
  if (!fs::path(path).parent_path().empty()) fs::create_directories(fs::path(path).parent_path());
  file_ = std::fopen(path.c_str(), "a");
  LINEA_CHECK(file_ != nullptr, "train", "cannot open the run log '", path, "' for writing: ", std::strerror(errno));
}

RunLog::~RunLog() {
  if (file_) std::fclose(file_);
}

void RunLog::write(const json::Value& record) {
  const std::string line = json::dump(record) + "\n";
  const bool ok = std::fwrite(line.data(), 1, line.size(), file_) == line.size() && std::fflush(file_) == 0;
  LINEA_CHECK(ok, "train", "cannot write the run log '", path_, "': ", std::strerror(errno));
}

}  // namespace linea::train
