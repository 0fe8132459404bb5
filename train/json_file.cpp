#include "train/json_file.h"

#include "train/file_io.h"

namespace linea::train {

json::Value read_json_file(const std::string& path, const char* what) {
  return json::parse(read_file(path, what), path);
}

void write_json_file(const std::string& path, const json::Value& value) {
  write_file_atomically(path, json::dump(value, 2) + "\n");
}

}  // namespace linea::train
