#pragma once
// `linea paper`: the ReGLA paper's experiments (Lu et al., "Refining Gated Linear Attention"),
// one file each, registered in registry.cpp. An experiment reads a PaperRun (what the user asked
// for) and fills a Report (report.h), which `linea paper` writes as DIR/<name>.md (Markdown, the
// paper's numbers beside linea's), DIR/<name>.json, and the PNG figures it adds. docs/paper.md
// has the experiments and their results.
//
// Adding an experiment: write
// tools/paper/<name>.cpp defining `Experiment <name>_experiment()`, declare it below, add one line
// to paper_experiments().
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tools/paper/report.h"

namespace linea::cli::paper {

// tiny: seconds on the CPU, CI's smoke test. small: the real run (minutes; a GPU where it trains).
enum class Scale { Tiny, Small };
std::string scale_name(Scale scale);
Scale parse_scale(const std::string& name);  // linea::Error naming the known scales otherwise

struct PaperRun {
  Scale scale = Scale::Tiny;
  std::string out;         // the directory the report goes to (made if missing)
  std::string device = "cpu";
  std::string data;        // for the experiments that train: "" = the default corpus
  uint64_t seed = 0;
  // The tables' runs (lm_runs.h): seeds per row (seed, seed + 1, ...; a row's perplexity is their
  // mean), and the rows to run (empty: all; ids from the experiment's `rows`).
  int64_t seeds = 1;
  std::vector<std::string> rows;
  // Picks the value for this run's scale: run.pick(tiny, small).
  template <class T>
  T pick(T tiny, T small) const { return scale == Scale::Tiny ? tiny : small; }
};

struct Experiment {
  std::string name;
  std::string summary;  // one line for `linea paper --help`
  std::function<void(const PaperRun& run, Report& report)> run;
  std::vector<std::string> rows{};  // the ids --rows may name (a table's rows); empty: no --rows
};

// The ids of a table's rows (anything with an `id`), in order: an Experiment's `rows`.
template <class Row>
std::vector<std::string> ids_of(const std::vector<Row>& rows) {
  std::vector<std::string> ids;
  for (const Row& r : rows) ids.push_back(r.id);
  return ids;
}

// The registry, in the order `linea paper --help` lists them.
const std::vector<Experiment>& paper_experiments();
// The experiment with this name, or nullptr.
const Experiment* find_experiment(const std::string& name);
std::vector<std::string> experiment_names();

// One per file.
Experiment theorem_experiment();  // theorem.cpp: Theorem 3.1 and Figure 2
Experiment gates_experiment();    // gates.cpp: Figures 3 and 4
Experiment table4_experiment();   // table4.cpp: Table 4, from scratch and w/ Pretrain
Experiment table6_experiment();   // table6.cpp: Table 6, feature dims and feature maps
Experiment table2_experiment();   // table2.cpp: Table 2, GLA with and without the output norm
Experiment causality_experiment();  // causality.cpp: eq. 12's global key max against the prefix max
Experiment decode_experiment();     // decode.cpp: Figure 5, generation time and memory against length

}  // namespace linea::cli::paper
