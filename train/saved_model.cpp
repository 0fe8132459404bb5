#include "train/saved_model.h"

#include <filesystem>

namespace linea::train {

json::Value tokenizer_record(const Tokenizer& tokenizer) {
  json::Value v = json::Value::object();
  v["kind"] = tokenizer.name();
  v["vocab_size"] = tokenizer.vocab_size();
  v["file"] = tokenizer.file_contents();
  return v;
}

std::unique_ptr<Tokenizer> tokenizer_from_record(const json::Value& record, const std::string& origin) {
  LINEA_CHECK(record.is_object() && record.contains("file"), "checkpoint", origin, " holds no tokenizer");
  return parse_tokenizer(json::get<std::string>(record, "file", origin), origin);
}

SavedModel load_saved_model(const std::string& path, Device device) {
  namespace fs = std::filesystem;
  LINEA_CHECK(fs::exists(path), "checkpoint", "'", path, "' does not exist");
  std::string dir = path;
  if (!fs::exists(fs::path(path) / "manifest.json")) {
    const std::optional<std::string> latest = latest_checkpoint(path);
    LINEA_CHECK(latest.has_value(), "checkpoint", "'", path, "' holds no checkpoint (no LATEST file and no manifest.json)");
    dir = *latest;
  }
  SavedModel saved;
  saved.dir = dir;
  saved.checkpoint = load_checkpoint(dir);
  const nn::ModelConfig config = nn::ModelConfig::from_json(saved.checkpoint.config);
  saved.tokenizer = tokenizer_from_record(saved.checkpoint.trainer.tokenizer, dir + "/trainer.json");
  LINEA_CHECK(saved.tokenizer->vocab_size() == config.vocab_size, "checkpoint", "the tokenizer in ", dir, " has ",
              saved.tokenizer->vocab_size(), " ids but the model's vocabulary is ", config.vocab_size);
  Generator gen(0);
  saved.model = std::make_shared<nn::LanguageModel>(config, gen);
  saved.model->load_state_dict(saved.checkpoint.model);
  saved.model->to(device);
  saved.model->eval();
  return saved;
}

}  // namespace linea::train
