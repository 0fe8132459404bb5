#include "train/checkpoint.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <set>
#include <vector>

#include "nn/model.h"
#include "tensor/number_text.h"
#include "train/file_io.h"
#include "train/json_file.h"
#include "train/safetensors.h"

namespace linea::train {

namespace fs = std::filesystem;

namespace {

constexpr int kFormatVersion = 1;
constexpr const char* kLatest = "LATEST";
constexpr const char* kManifest = "manifest.json";
constexpr const char* kModel = "model.safetensors";
constexpr const char* kConfig = "config.json";
constexpr const char* kOptimizer = "optimizer.safetensors";
constexpr const char* kTrainer = "trainer.json";
constexpr std::array<const char*, 4> kFiles = {kModel, kConfig, kOptimizer, kTrainer};
constexpr const char* kTempSuffix = ".tmp";
constexpr const char* kScalarPrefix = "scalar.";

template <class... Parts>
[[noreturn]] void fail_checkpoint(const Parts&... parts) {
  fail("checkpoint", parts...);
}

std::string path_in(const std::string& dir, const char* file) { return (fs::path(dir) / file).string(); }

std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, value);
  return text;
}

// Doubles and uint64 travel as text (safetensors metadata holds strings; JSON integers stop at
// int64): the shortest text that reads back to the same value (shortest_text), so a resumed run
// is bit-exact.
template <class T>
T from_text(const std::string& text, const std::string& file, const std::string& what) {
  T value{};
  if (parse_whole_number(text, value) != std::errc())
    fail_checkpoint("'", file, "': ", what, " should be a number, got '", text.substr(0, 40), "'");
  return value;
}

// ---- the version directories under a root ----

// "step-00001000" -> (1000, 0); "step-00001000-2" -> (1000, 2); anything else -> nullopt.
std::optional<std::pair<int64_t, int64_t>> version_of(const std::string& name) {
  if (name.rfind("step-", 0) != 0) return std::nullopt;
  int64_t step = 0, suffix = 0;
  const char* begin = name.data() + 5;
  const char* end = name.data() + name.size();
  // Digits only (from_chars would take a sign), then optionally '-' and digits.
  auto number = [end](const char* from, int64_t& value) -> const char* {
    if (from == end || *from < '0' || *from > '9') return nullptr;
    const auto [p, ec] = std::from_chars(from, end, value);
    return ec == std::errc() ? p : nullptr;
  };
  const char* p = number(begin, step);
  if (p && p != end) p = *p == '-' ? number(p + 1, suffix) : nullptr;
  if (p != end) return std::nullopt;
  return std::make_pair(step, suffix);
}

std::string version_name(int64_t step, int64_t suffix) {
  char text[64];
  std::snprintf(text, sizeof text, "step-%08" PRId64, step);
  return suffix == 0 ? text : std::string(text) + "-" + std::to_string(suffix);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Leftovers of interrupted saves: temporary directories and LATEST's temporary files. Nothing
// refers to them, so they are safe to delete (one writer per root).
void remove_leftovers(const std::string& root) {
  for (const fs::directory_entry& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if ((name.rfind("step-", 0) == 0 && ends_with(name, kTempSuffix)) || name.rfind(std::string(kLatest) + ".tmp", 0) == 0)
      fs::remove_all(entry.path());
  }
}

// The new checkpoint is committed by now: failing to delete an old one must not fail the save.
void prune(const std::string& root, std::pair<int64_t, int64_t> current, int keep_last) noexcept {
  if (keep_last <= 0) return;
  try {
    std::vector<std::pair<std::pair<int64_t, int64_t>, fs::path>> older;
    for (const fs::directory_entry& entry : fs::directory_iterator(root)) {
      const auto version = version_of(entry.path().filename().string());
      if (version && *version < current && entry.is_directory()) older.emplace_back(*version, entry.path());
    }
    std::sort(older.rbegin(), older.rend());
    for (size_t i = static_cast<size_t>(keep_last - 1); i < older.size(); ++i) fs::remove_all(older[i].second);
  } catch (const std::exception&) {
  }
}

// ---- the files of one checkpoint ----

void check_format_version(const std::string& version, const std::string& file) {
  if (version != std::to_string(kFormatVersion))
    fail_checkpoint("'", file, "' has format version '", version, "'; this build of linea reads version ",
                    kFormatVersion);
}

// Checkpoints of older versions name some parameters differently (nn/model.h: the block's mixer
// was "attn"): every key is brought up to today's name here, so whatever loads a checkpoint
// (resuming, eval, generate) sees only current names.
template <class Map>
Map with_current_names(Map entries, const std::string& file) {
  Map out;
  for (auto& [key, value] : entries) {
    const std::string name = nn::current_parameter_name(key);
    if (!out.emplace(name, std::move(value)).second)
      fail_checkpoint("'", file, "' holds '", name, "' twice, under an old name and the current one");
  }
  return out;
}

void write_optimizer(const std::string& path, const OptimizerState& state) {
  Metadata metadata{{"format_version", std::to_string(kFormatVersion)}, {"optimizer", state.type}};
  for (const auto& [name, value] : state.scalars) metadata[kScalarPrefix + name] = shortest_text(value);
  save_safetensors(path, state.tensors, metadata);
}

OptimizerState read_optimizer(const std::string& path) {
  Safetensors file = load_safetensors(path);
  OptimizerState state{"", with_current_names(std::move(file.tensors), path), {}};
  check_format_version(file.metadata["format_version"], path);
  for (const auto& [key, value] : file.metadata) {
    if (key == "optimizer") state.type = value;
    else if (key.rfind(kScalarPrefix, 0) == 0)
      state.scalars[key.substr(std::string(kScalarPrefix).size())] = from_text<double>(value, path, "scalar '" + key + "'");
    else if (key != "format_version") fail_checkpoint("'", path, "' has an unknown metadata key '", key, "'");
  }
  state.scalars = with_current_names(std::move(state.scalars), path);
  return state;
}

json::Value trainer_json(const TrainerState& t) {
  json::Value out;
  out["step"] = t.step;
  out["lr"] = t.lr;
  out["rng"]["seed"] = shortest_text(t.rng_seed);
  out["rng"]["offset"] = shortest_text(t.rng_offset);
  out["data"] = t.data;
  out["tokenizer"] = t.tokenizer;
  out["extra"] = t.extra;
  return out;
}

TrainerState read_trainer(const std::string& path) {
  const json::Value v = read_json_file(path, "trainer state");
  const json::Value& rng = json::at(v, "rng", path);
  TrainerState t;
  t.step = json::get<int64_t>(v, "step", path);
  t.lr = json::get<double>(v, "lr", path);
  t.rng_seed = from_text<uint64_t>(json::get<std::string>(rng, "seed", path), path, "rng.seed");
  t.rng_offset = from_text<uint64_t>(json::get<std::string>(rng, "offset", path), path, "rng.offset");
  t.data = json::at(v, "data", path);
  t.tokenizer = json::at(v, "tokenizer", path);
  t.extra = json::at(v, "extra", path);
  return t;
}

// Writes the checkpoint's files into dir, the manifest last: a manifest means the rest is there.
void write_files(const std::string& dir, const Checkpoint& c) {
  save_safetensors(path_in(dir, kModel), c.model,
                   {{"format", "linea"}, {"format_version", std::to_string(kFormatVersion)}});
  write_json_file(path_in(dir, kConfig), c.config);
  write_optimizer(path_in(dir, kOptimizer), c.optimizer);
  write_json_file(path_in(dir, kTrainer), trainer_json(c.trainer));

  json::Value manifest;
  manifest["format_version"] = kFormatVersion;
  for (const char* file : kFiles) {
    const std::string path = path_in(dir, file);
    manifest["files"][file]["bytes"] = static_cast<int64_t>(fs::file_size(path));
    manifest["files"][file]["fnv1a64"] = hex64(file_fnv1a64(path, "checkpoint file"));
  }
  write_json_file(path_in(dir, kManifest), manifest);
  sync_directory(dir);
}

}  // namespace

std::string save_checkpoint(const std::string& root, const Checkpoint& checkpoint, const CheckpointOptions& options) {
  const int64_t step = checkpoint.trainer.step;
  LINEA_CHECK(step >= 0, "checkpoint", "negative step ", step);
  int64_t suffix = 0;
  try {
    fs::create_directories(root);
    remove_leftovers(root);
    while (fs::exists(fs::path(root) / version_name(step, suffix))) ++suffix;
  } catch (const fs::filesystem_error& e) {
    fail_checkpoint("cannot prepare the checkpoint directory '", root, "': ", e.what());
  }
  const std::string name = version_name(step, suffix);
  const std::string final_dir = path_in(root, name.c_str());
  const std::string temp_dir = final_dir + kTempSuffix;

  try {
    fs::create_directory(temp_dir);
    write_files(temp_dir, checkpoint);
    fs::rename(temp_dir, final_dir);
  } catch (const fs::filesystem_error& e) {
    std::error_code ignored;
    fs::remove_all(temp_dir, ignored);
    fail_checkpoint("cannot write the checkpoint '", final_dir, "': ", e.what());
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(temp_dir, ignored);
    throw;
  }
  sync_directory(root);
  write_file_atomically(path_in(root, kLatest), name + "\n");  // the commit point
  prune(root, {step, suffix}, options.keep_last);
  return final_dir;
}

std::optional<std::string> latest_checkpoint(const std::string& root) {
  const std::string pointer = path_in(root, kLatest);
  std::error_code ec;
  const fs::file_type type = fs::status(pointer, ec).type();
  // Only a pointer that is truly absent means a fresh run; one we cannot see must not restart
  // training from scratch.
  if (type == fs::file_type::not_found) return std::nullopt;
  if (ec) fail_checkpoint("cannot read '", pointer, "': ", ec.message());
  std::string name = read_file(pointer, "checkpoint pointer");
  if (!name.empty() && name.back() == '\n') name.pop_back();
  // A plain name of this root: LATEST never points elsewhere.
  if (!version_of(name))
    fail_checkpoint("'", pointer, "' is corrupt: it should name a checkpoint such as step-00001000, got '",
                    name.substr(0, 40), "'");
  const std::string dir = path_in(root, name.c_str());
  if (!fs::is_directory(dir, ec)) fail_checkpoint("'", pointer, "' names '", name, "', which does not exist");
  return dir;
}

void verify_checkpoint(const std::string& dir) {
  const std::string manifest_path = path_in(dir, kManifest);
  const json::Value manifest = read_json_file(manifest_path, "checkpoint manifest");
  const int64_t version = json::get<int64_t>(manifest, "format_version", manifest_path);
  check_format_version(std::to_string(version), manifest_path);
  const json::Value& files = json::at(manifest, "files", manifest_path);
  LINEA_CHECK(files.size() == kFiles.size(), "checkpoint", "'", manifest_path, "' should list ", kFiles.size(),
              " files, lists ", files.size());
  for (const char* file : kFiles) {
    const std::string path = path_in(dir, file);
    const json::Value* entry = json::find(files, file);
    if (!entry) fail_checkpoint("'", manifest_path, "' does not list ", file);
    const int64_t expected_bytes = json::get<int64_t>(*entry, "bytes", manifest_path);
    const std::string expected_hash = json::get<std::string>(*entry, "fnv1a64", manifest_path);
    std::error_code ec;
    const uintmax_t bytes = fs::file_size(path, ec);
    if (ec) fail_checkpoint("'", path, "' is missing or unreadable: ", ec.message());
    if (static_cast<int64_t>(bytes) != expected_bytes)
      fail_checkpoint("'", path, "' is ", bytes, " bytes, but ", kManifest, " says ", expected_bytes,
                      " (truncated or corrupt)");
    if (hex64(file_fnv1a64(path, "checkpoint file")) != expected_hash)
      fail_checkpoint("'", path, "' does not match its checksum in ", kManifest, " (corrupt)");
  }
}

Checkpoint load_checkpoint(const std::string& dir) {
  verify_checkpoint(dir);
  Checkpoint c;
  const std::string model_path = path_in(dir, kModel);
  Safetensors model = load_safetensors(model_path);
  check_format_version(model.metadata["format_version"], model_path);
  c.model = with_current_names(std::move(model.tensors), model_path);
  const std::string config_path = path_in(dir, kConfig);
  c.config = read_json_file(config_path, "model config");
  c.optimizer = read_optimizer(path_in(dir, kOptimizer));
  c.trainer = read_trainer(path_in(dir, kTrainer));
  return c;
}

}  // namespace linea::train
