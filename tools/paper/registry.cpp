#include "tensor/error.h"
#include "tools/paper/experiment.h"

namespace linea::cli::paper {

// A new experiment is a file defining its Experiment and one line here.
const std::vector<Experiment>& paper_experiments() {
  static const std::vector<Experiment> experiments = {
      theorem_experiment(),
      gates_experiment(),
      table4_experiment(),
      table6_experiment(),
      table2_experiment(),
      causality_experiment(),
      decode_experiment(),
  };
  return experiments;
}

const Experiment* find_experiment(const std::string& name) {
  for (const Experiment& e : paper_experiments())
    if (e.name == name) return &e;
  return nullptr;
}

std::vector<std::string> experiment_names() {
  std::vector<std::string> names;
  for (const Experiment& e : paper_experiments()) names.push_back(e.name);
  return names;
}

std::string scale_name(Scale scale) { return scale == Scale::Tiny ? "tiny" : "small"; }

Scale parse_scale(const std::string& name) {
  if (name == "tiny") return Scale::Tiny;
  if (name == "small") return Scale::Small;
  throw Error("unknown scale '" + name + "' (known: tiny, small)");
}

}  // namespace linea::cli::paper
