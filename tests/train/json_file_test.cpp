// JSON files: a value written reads back the same, and errors name the file's role, its path,
// and for bad JSON the line and column.
#include "tests/test_util.h"
#include "tests/train/temp_dir.h"
#include "train/file_io.h"
#include "train/json_file.h"

namespace linea::train {
namespace {

TEST(JsonFile, RoundTrips) {
  linea::testing::TempDir dir;
  const std::string path = dir / "run.json";
  json::Value v;
  v["name"] = "run";
  v["seed"] = uint64_t{18446744073709551615ull};
  v["lr"] = 3e-4;
  write_json_file(path, v);
  EXPECT_EQ(read_json_file(path, "config file"), v);
  EXPECT_EQ(read_file(path, "config file"), json::dump(v, 2) + "\n");
}

TEST(JsonFile, ErrorsNameTheFile) {
  linea::testing::TempDir dir;
  const std::string path = dir / "run.json";
  EXPECT_LINEA_ERROR(read_json_file(path, "config file"), "config file", "run.json", "does not exist");
  write_file_atomically(path, "{\"a\": 1,\n \"b\" 2}\n");
  EXPECT_LINEA_ERROR(read_json_file(path, "config file"), "run.json", "line 2");
}

}  // namespace
}  // namespace linea::train
