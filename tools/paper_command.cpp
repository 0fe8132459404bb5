// `linea paper EXPERIMENT`: one of the ReGLA paper's experiments, run at a scale and written to
// --out as Markdown, JSON and PNG (tools/paper/experiment.h has the registry).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/paper/experiment.h"

namespace linea::cli {

namespace {

std::string experiment_listing() {
  std::string s = "Experiments:";
  for (const paper::Experiment& e : paper::paper_experiments()) {
    s += "\n  " + e.name + "  " + e.summary;
    if (!e.rows.empty()) s += "\n      rows: " + join(e.rows, ", ");
  }
  return s;
}

// "a,b,,c" -> {"a", "b", "c"}.
std::vector<std::string> split_rows(const std::string& text) {
  std::vector<std::string> ids;
  std::string id;
  for (char c : text + ",") {
    if (c != ',') {
      id += c;
    } else if (!id.empty()) {
      ids.push_back(id);
      id.clear();
    }
  }
  return ids;
}

// Runs one experiment and writes its report under run.out.
void run_experiment(const paper::Experiment& experiment, const paper::PaperRun& run) {
  const auto start = std::chrono::steady_clock::now();
  paper::Report report(experiment.name);
  experiment.run(run, report);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string scale = paper::scale_name(run.scale);
  report.json()["run"] = {{"experiment", experiment.name}, {"scale", scale}, {"device", run.device},
                          {"seed", run.seed},                {"seconds", seconds}};
  for (const std::string& path : report.write(run.out)) std::printf("wrote %s\n", path.c_str());
  std::printf("linea paper %s --scale %s: done in %.1f s\n", experiment.name.c_str(), scale.c_str(), seconds);
  std::fflush(stdout);
}

int run(const std::string& program, std::span<const std::string> args) {
  std::string experiment, scale = "tiny", out, device = "cpu", data;
  uint64_t seed = 0;
  int64_t seeds = 1;
  std::string rows;
  Flags flags(program,
              "Runs one experiment of the ReGLA paper (Lu et al., \"Refining Gated Linear Attention\") and writes\n"
              "OUT/EXPERIMENT.md (linea's numbers beside the paper's), OUT/EXPERIMENT.json and its figures as PNG.\n"
              "docs/paper.md has the results. " +
                  experiment_listing());
  flags.add_positional("EXPERIMENT", &experiment, "which experiment (listed above), or 'all' for every one in turn");
  flags.add_choice("scale", &scale, {"tiny", "small"}, "tiny: seconds on a CPU (CI's smoke test); small: the real run");
  flags.add("out", &out, "directory for the report (default: paper/<EXPERIMENT>-<scale>)");
  flags.add_choice("device", &device, {"cpu", "cuda"}, "where the experiments that train do so");
  flags.add("data", &data, "corpus of the experiments that train (\"\": the default corpus)");
  flags.add("seed", &seed, "seed of every random draw");
  flags.add("seeds", &seeds, "the tables: seeds per row (seed, seed + 1, ...); a row reports their mean");
  flags.add("rows", &rows, "the tables: only these rows, comma-separated ids (listed above under each table)");
  if (!flags.parse(args)) return 0;
  const paper::Experiment* chosen = paper::find_experiment(experiment);
  if (!chosen && experiment != "all") {
    std::string message = "unknown experiment '" + experiment + "' (known: " + join(paper::experiment_names(), ", ") + ", or 'all')";
    const std::string near = closest_match(experiment, paper::experiment_names());
    if (!near.empty()) message += "; did you mean '" + near + "'?";
    flags.fail(message);
  }
  if (seeds < 1) flags.fail("--seeds must be at least 1, got " + std::to_string(seeds));
  const std::vector<std::string> row_ids = split_rows(rows);
  if (!row_ids.empty()) {
    if (!chosen) flags.fail("--rows names the rows of one experiment, not of 'all'");
    for (const std::string& id : row_ids)
      if (std::find(chosen->rows.begin(), chosen->rows.end(), id) == chosen->rows.end())
        flags.fail("experiment '" + chosen->name + "' has no row '" + id + "' (its rows: " +
                   (chosen->rows.empty() ? std::string("none") : join(chosen->rows, ", ")) + ")");
  }
  paper::PaperRun run;
  run.seeds = seeds;
  run.rows = row_ids;
  run.scale = paper::parse_scale(scale);
  run.out = out.empty() ? "paper/" + experiment + "-" + scale : out;
  run.device = device;
  run.data = data;
  run.seed = seed;

  if (chosen) {
    run_experiment(*chosen, run);
  } else {
    for (const paper::Experiment& e : paper::paper_experiments()) run_experiment(e, run);
  }
  return 0;
}

}  // namespace

Command paper_command() { return {"paper", "run one of the ReGLA paper's experiments (theorem, gates, table4, table6, table2, causality)", run}; }

}  // namespace linea::cli
