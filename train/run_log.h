#pragma once
// A run's JSONL log (DIR/log.jsonl): one JSON object per line, written and flushed as it happens,
// so a crashed run keeps everything up to its last line and `linea plot` can read a live run.
//
//   {"kind":"config", ...}                                   the run's options, once
//   {"kind":"step","step":120,"loss":2.31,"lr":0.0006,...}   every training step
//   {"kind":"eval","step":100,"split":"valid","loss":2.45,"ppl":11.6}
//   {"kind":"sample","step":600,"text":"..."}
//   {"kind":"stopped","step":250,"checkpoint":"..."}         a run asked to stop (Ctrl-C) saved here
//   {"kind":"resume","step":300}                             where a resumed run picked up
#include <cstdio>
#include <string>

#include "nn/json.h"

namespace linea::train {

class RunLog {
 public:
  // Opens path for appending (creating it). With keep_through_step >= 0 (a resumed run), first
  // rewrites the file without the records of steps after that one, which the interrupted run
  // logged past its last checkpoint and the resumed run is about to redo.
  explicit RunLog(const std::string& path, int64_t keep_through_step = -1);
  ~RunLog();
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;

  void write(const json::Value& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace linea::train
