// `linea paper gates`: the refined gate against the sigmoid gate. Figure 3: their gradients over
// the gate activation (autograd through the layer's refined_log_gate, checked against the closed
// form of gates_math.h). Figure 4: the activations before and after training from biases that
// saturate them (gate_training.h).
#include <algorithm>
#include <cmath>
#include <string>

#include "tools/paper/experiment.h"
#include "tools/paper/gate_training.h"
#include "tools/paper/gates_math.h"

namespace linea::cli::paper {

namespace {

const std::vector<double> kRefine = {0.05, 0.25, 0.5, 0.75, 0.95};
const plot::Color kRefineColors[] = {kRed, kOrange, kGreen, kBlue, kPurple};

void figure3(const PaperRun& run, Report& report) {
  const int points = run.pick(199, 999);
  std::vector<double> g_grid;
  for (int i = 1; i <= points; ++i) g_grid.push_back(static_cast<double>(i) / (points + 1));
  std::vector<double> a;
  for (double g : g_grid) a.push_back(logit(g));

  report.heading("Figure 3: gradient of the refined gate F against the sigmoid gate g");
  report.paragraph("F = (1 - r) g^2 + r (1 - (1 - g)^2) with g = sigmoid(a), r = sigmoid(c) (the paper's eq. 16). "
                   "Curves: dF/da over g for fixed refining activations r, by linea's autograd in float64 through "
                   "nn::linear::refined_log_gate (the layer's composite gate), against the sigmoid's g (1 - g). "
                   "docs/paper.md derives the closed form dF/da = 2 g (1 - g) ((1 - r) g + r (1 - g)).");
  double worst = 0;
  std::vector<plot::Series> series;
  std::vector<plot::LegendEntry> legend;
  const std::vector<double> sigmoid = sigmoid_gate_gradient_autograd(a);
  std::vector<plot::Point> sigmoid_curve;
  for (size_t i = 0; i < g_grid.size(); ++i) {
    sigmoid_curve.push_back({g_grid[i], sigmoid[i]});
    worst = std::max(worst, std::abs(sigmoid[i] - sigmoid_gate_gradient(g_grid[i])));
  }
  MarkdownTable table({"r", "dF/da at g = 0.01", "at g = 0.5", "at g = 0.99", "sigmoid g(1-g) at 0.01 / 0.5 / 0.99",
                       "max |autograd - closed form| (dF/da, dF/dc)"});
  json::Value curves = json::Value::array();
  for (size_t k = 0; k < kRefine.size(); ++k) {
    const std::vector<double> c(a.size(), logit(kRefine[k]));
    const std::vector<RefinedGateGradient> grads = refined_gate_gradient_autograd(a, c);
    std::vector<plot::Point> curve;
    std::vector<double> forget;
    double worst_here = 0;
    for (size_t i = 0; i < g_grid.size(); ++i) {
      const RefinedGateGradient exact = refined_gate_gradient_closed_form(g_grid[i], kRefine[k]);
      worst_here = std::max({worst_here, std::abs(grads[i].forget - exact.forget), std::abs(grads[i].refine - exact.refine)});
      curve.push_back({g_grid[i], grads[i].forget});
      forget.push_back(grads[i].forget);
    }
    worst = std::max(worst, worst_here);
    auto at = [&](double g) { return refined_gate_gradient_closed_form(g, kRefine[k]).forget; };
    table.add_row({format_number(kRefine[k], 2), format_number(at(0.01), 4), format_number(at(0.5), 4),
                   format_number(at(0.99), 4), "0.0099 / 0.25 / 0.0099", format_number(worst_here, 3)});
    curves.push_back({{"r", kRefine[k]}, {"dF_da", forget}});
    series.push_back({.points = curve, .color = kRefineColors[k], .line_width = 3});
    legend.push_back({"refined, r = " + format_number(kRefine[k], 2), kRefineColors[k], 3, 0});
  }
  series.push_back({.points = sigmoid_curve, .color = kGray, .line_width = 5, .alpha = 0.6});
  legend.push_back({"sigmoid: g (1 - g)", kGray, 5, 0});
  series.push_back({.points = {{0.5, 0.42}}});  // undrawn: room under the legend
  report.table(table);
  report.paragraph("Largest difference between autograd and the closed form over the grid: " + format_number(worst, 3) +
                   ". Near the boundaries the refined gate's gradient reaches twice the sigmoid's (r -> 1 as g -> 0, "
                   "r -> 0 as g -> 1); at r = 0.5, F = g and the curves coincide.");
  report.json()["figure3"] = {{"g", g_grid}, {"sigmoid", sigmoid}, {"refined", curves}, {"max_abs_error", worst}};
  report.figure("gates_figure3.png",
                {.title = "Figure 3: dF/da of the refined gate vs the sigmoid's dg/da", .x_title = "gate activation g",
                 .y_title = "gradient", .series = series, .legend = legend},
                "Figure 3 in linea: the refined gate's gradient over g for five refining activations r, the sigmoid "
                "gate's in gray.");
}

// Logits beyond +-16 (activations within 1e-7 of 0 or 1, float32's resolution near 1) count as
// +-16: in the histograms' end bins, and in the mean logit, which a gate saturated to exactly 0
// or 1 would otherwise make infinite (or NaN, with both).
constexpr double kLogitLimit = 16;

// Summary numbers of one distribution of activations.
json::Value describe(const std::vector<double>& v) {
  double mean = 0, mean_logit = 0, low = 0, high = 0;
  for (double x : v) {
    mean += x;
    mean_logit += std::clamp(std::log(x) - std::log1p(-x), -kLogitLimit, kLogitLimit);
    low += x < 0.01;
    high += x > 0.99;
  }
  const double n = std::max<double>(1, static_cast<double>(v.size()));
  return {{"mean", mean / n}, {"mean_logit", mean_logit / n}, {"below_0.01", low / n}, {"above_0.99", high / n}};
}

std::string summary(const json::Value& d) {
  return format_number(d["mean_logit"].get<double>(), 4) + " / " + format_number(100 * d["below_0.01"].get<double>(), 3) +
         "% / " + format_number(100 * d["above_0.99"].get<double>(), 3) + "%";
}

void figure4(const PaperRun& run, Report& report) {
  const double bias = 8;  // sigmoid(8) = 0.99966, sigmoid(-8) = 3.4e-4: the paper gives no value
  const int bins = 64;
  const double limit = kLogitLimit;
  report.heading("Figure 4: gate activations before and after training, from saturating biases");
  MarkdownTable table({"gate", "bias", "steps", "before: mean logit / <0.01 / >0.99", "after: mean logit / <0.01 / >0.99",
                       "valid loss"});
  json::Value runs = json::Value::array();
  for (GateUnderStudy gate : {GateUnderStudy::Sigmoid, GateUnderStudy::Refined}) {
    std::vector<plot::Series> series;
    std::vector<plot::LegendEntry> legend;
    const plot::Color colors[] = {kBlue, kRed};
    int which = 0;
    for (double b : {bias, -bias}) {
      const GateRun r = train_gate_run(run, gate, b);
      const json::Value before = describe(r.before), after = describe(r.after);
      table.add_row({gate_under_study_name(gate), format_number(b, 3), std::to_string(r.steps), summary(before),
                     summary(after), format_number(r.valid_loss, 4)});
      const std::vector<double> h_before = logit_histogram(r.before, bins, limit), h_after = logit_histogram(r.after, bins, limit);
      runs.push_back({{"gate", gate_under_study_name(gate)}, {"bias", b}, {"steps", r.steps}, {"before", before},
                      {"after", after}, {"valid_loss", r.valid_loss}, {"histogram_before", h_before},
                      {"histogram_after", h_after}});
      // Each histogram as a step outline over [0, 1]: before thin and faint, after thick.
      for (int after_training = 0; after_training < 2; ++after_training) {
        const std::vector<double>& h = after_training ? h_after : h_before;
        std::vector<plot::Point> steps;
        for (int i = 0; i < bins; ++i) {
          steps.push_back({-limit + 2 * limit * i / bins, h[i]});
          steps.push_back({-limit + 2 * limit * (i + 1) / bins, h[i]});
        }
        series.push_back({.points = steps, .color = colors[which], .line_width = after_training ? 4.0 : 2.0,
                          .alpha = after_training ? 1.0 : 0.45});
        legend.push_back({"bias " + format_number(b, 2) + (after_training ? ", after" : ", before"), colors[which],
                          after_training ? 4.0 : 2.0, 0});
      }
      ++which;
    }
    const std::string name = gate_under_study_name(gate);
    report.figure("gates_figure4_" + name + ".png",
                  {.title = "Figure 4: " + name + " gate activations", .x_title = "logit of the gate activation, log(a / (1 - a))",
                   .y_title = "fraction of activations", .series = series, .legend = legend},
                  "Figure 4 in linea, the " + name + " gate: histograms (" + std::to_string(bins) +
                      " bins, by logit, the end bins holding everything beyond +-16) of its activations on the same validation tokens before and after training.");
  }
  report.paragraph("One ReGLA layer (`linea train`'s model, pattern R, char tokens of the " +
                   std::string(run.data.empty() ? "default corpus" : run.data) +
                   ") with its gate on the key dim, every gate bias (forget and refine) set to +-" +
                   format_number(bias, 2) +
                   ". The sigmoid gate is GLA's (the paper's comparison): its decay is g^(1/16); the histogram shows g. "
                   "The paper reports no numbers for Figure 4, only that the sigmoid gate stays in the extreme region "
                   "while the refined gate spreads out.");
  report.table(table);
  report.json()["figure4"] = {{"bias", bias}, {"bins", bins}, {"logit_limit", limit}, {"runs", runs}};
}

void run_gates(const PaperRun& run, Report& report) {
  figure3(run, report);
  figure4(run, report);
}

}  // namespace

Experiment gates_experiment() {
  return {"gates", "Figures 3 and 4: the refined gate's gradient and activations against the sigmoid gate's", run_gates};
}

}  // namespace linea::cli::paper
