#pragma once
// The JSON files of train/ and the command line (a run's config file, a checkpoint's manifest,
// model config and trainer state): read whole and parsed, with errors that name the file's role
// and path, and for bad JSON the line and column; written atomically (train/file_io.h) as JSON
// indented by two spaces and a newline, so that a crash never leaves half a file.
#include <string>

#include "nn/json.h"

namespace linea::train {

// `what` names the file's role in errors: "the config file 'run.json' does not exist".
json::Value read_json_file(const std::string& path, const char* what);
void write_json_file(const std::string& path, const json::Value& value);

}  // namespace linea::train
