// `linea plot`: reading training logs, the chart's scales and ticks, and a PNG of two runs read
// back byte by byte.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "tests/train/temp_dir.h"
#include "tools/command.h"
#include "tools/commands.h"
#include "tools/plot/axis.h"
#include "tools/plot/chart.h"
#include "tools/plot/curves.h"
#include "tools/plot/font.h"
#include "tools/plot/png_writer.h"
#include "tools/plot/run_log.h"

#ifdef LINEA_WITH_PNG
#include <png.h>
#endif

namespace linea::plot {
namespace {

using linea::testing::TempDir;

void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// A run whose loss falls from `start` like start / sqrt(step), with an eval every 50 steps.
std::string synthetic_log(double start, int steps) {
  std::string text = "{\"kind\":\"config\",\"model\":\"regla\",\"d_model\":64}\n";
  for (int s = 1; s <= steps; ++s) {
    const double loss = 1.5 + start / std::sqrt(s) + 0.05 * std::sin(s * 1.7);
    text += "{\"kind\":\"step\",\"step\":" + std::to_string(s) + ",\"loss\":" + std::to_string(loss) +
            ",\"lr\":0.0006,\"tokens\":" + std::to_string(s * 2048) + ",\"time_s\":" + std::to_string(s * 0.5) + "}\n";
    if (s % 50 == 0)
      text += "{\"kind\":\"eval\",\"step\":" + std::to_string(s) + ",\"split\":\"valid\",\"loss\":" +
              std::to_string(loss + 0.1) + ",\"ppl\":" + std::to_string(std::exp(loss + 0.1)) + "}\n";
  }
  return text + "{\"kind\":\"sample\",\"text\":\"once upon\"}\n";
}

// ---- logs ----

TEST(PlotLog, ParsesStepsAndEvalsAndSkipsOtherKinds) {
  const RunLog log = parse_run_log(
      "{\"kind\":\"config\",\"lr\":0.1}\n"
      "{\"kind\":\"step\",\"step\":2,\"loss\":2.5,\"tokens\":200,\"time_s\":1.5}\n"
      "\n"
      "{\"kind\":\"step\",\"step\":1,\"loss\":3.0}\n"
      "{\"kind\":\"eval\",\"step\":2,\"split\":\"valid\",\"loss\":2.7,\"ppl\":14.9}\n"
      "{\"kind\":\"test\",\"loss\":2.6}\n"
      "{\"kind\":\"step\",\"step\":2,\"loss\":2.4,\"tokens\":200}\n",  // resumed: this one wins
      "run/log.jsonl");
  ASSERT_EQ(log.steps.size(), 2u);
  EXPECT_EQ(log.steps[0].step, 1);
  EXPECT_TRUE(std::isnan(log.steps[0].tokens));
  EXPECT_EQ(log.steps[1].step, 2);
  EXPECT_DOUBLE_EQ(log.steps[1].loss, 2.4);
  EXPECT_EQ(log.steps[1].line, 7);
  ASSERT_EQ(log.evals.size(), 1u);
  EXPECT_EQ(log.evals[0].split, "valid");
  EXPECT_DOUBLE_EQ(log.evals[0].ppl, 14.9);
}

TEST(PlotLog, CorruptLineIsAnErrorNamingFileAndLine) {
  EXPECT_LINEA_ERROR(parse_run_log("{\"kind\":\"step\",\"step\":1,\"loss\":3}\n\n{\"kind\":\"st\n{}\n", "a/log.jsonl"),
                     "a/log.jsonl, line 3");
  EXPECT_LINEA_ERROR(parse_run_log("{\"kind\":\"step\",\"step\":1,\"loss\":3}\n[1,2]\n", "a/log.jsonl"),
                     "a/log.jsonl, line 2", "expected a JSON object");
  EXPECT_LINEA_ERROR(parse_run_log("\n{\"kind\":\"step\",\"step\":1}\n", "a/log.jsonl"), "a/log.jsonl, line 2",
                     "no 'loss'");
  EXPECT_LINEA_ERROR(parse_run_log("{\"kind\":\"eval\",\"step\":1.5,\"loss\":2}\n", "a/log.jsonl"), "line 1",
                     "'step' must be a non-negative integer");
}

TEST(PlotLog, AnUnfinishedLastLineIsLeftOut) {
  // A live run writing its next record, or one killed halfway through a line.
  const RunLog log = parse_run_log("{\"kind\":\"step\",\"step\":1,\"loss\":3}\n\n{\"kind\":\"step\",\"st", "a/log.jsonl");
  EXPECT_EQ(log.steps.size(), 1u);
  EXPECT_EQ(log.unfinished_line, 3);
  EXPECT_EQ(parse_run_log("{\"kind\":\"step\",\"step\":1,\"loss\":3}", "a/log.jsonl").unfinished_line, 0);
  EXPECT_EQ(parse_run_log("{\"kind\":\"st", "a/log.jsonl").steps.size(), 0u);
}

TEST(PlotLog, TimeContinuesAcrossAResume) {
  const RunLog log = parse_run_log(
      "{\"kind\":\"step\",\"step\":1,\"loss\":3,\"time_s\":10}\n"
      "{\"kind\":\"step\",\"step\":2,\"loss\":3,\"time_s\":20}\n"
      "{\"kind\":\"resume\",\"step\":2}\n"
      "{\"kind\":\"step\",\"step\":3,\"loss\":3,\"time_s\":4}\n",
      "a/log.jsonl");
  ASSERT_EQ(log.steps.size(), 3u);
  EXPECT_DOUBLE_EQ(log.steps[2].time_s, 24);
}

TEST(PlotLog, ReadsRunDirectoriesAndRejectsEmptyOrMissingLogs) {
  TempDir dir;
  write_text(dir / "run_a/log.jsonl", synthetic_log(4, 100));
  const RunLog log = read_run_log(dir / "run_a/");
  EXPECT_EQ(log.name, "run_a");
  EXPECT_EQ(log.steps.size(), 100u);
  EXPECT_EQ(log.evals.size(), 2u);
  EXPECT_EQ(read_run_log(dir / "run_a/log.jsonl").name, "run_a");  // the file itself also works

  write_text(dir / "empty/log.jsonl", "");
  EXPECT_LINEA_ERROR(read_run_log(dir / "empty"), "empty/log.jsonl", "no step or eval records");
  write_text(dir / "config_only/log.jsonl", "{\"kind\":\"config\"}\n");
  EXPECT_LINEA_ERROR(read_run_log(dir / "config_only"), "no step or eval records");
  std::filesystem::create_directories(dir / "no_log");
  EXPECT_LINEA_ERROR(read_run_log(dir / "no_log"), "no training log at", "no_log/log.jsonl");
}

// ---- curves ----

TEST(PlotCurves, MovingAverageIsCenteredAndKeepsTheEnds) {
  const std::vector<double> smooth = moving_average({0, 3, 0, 3, 0}, 3);
  const std::vector<double> expected = {0, 1, 2, 1, 0};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_DOUBLE_EQ(smooth[i], expected[i]) << i;
  EXPECT_EQ(moving_average({1, 2, 3}, 1), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(auto_smooth_window(10), 1);
  EXPECT_EQ(auto_smooth_window(1000), 21);
}

TEST(PlotCurves, EvalsTakeTokensFromTheStepsAroundThem) {
  const RunLog log = parse_run_log(
      "{\"kind\":\"step\",\"step\":10,\"loss\":3,\"tokens\":1000}\n"
      "{\"kind\":\"step\",\"step\":20,\"loss\":null,\"tokens\":2000}\n"
      "{\"kind\":\"eval\",\"step\":15,\"split\":\"valid\",\"loss\":2}\n"
      "{\"kind\":\"eval\",\"step\":30,\"split\":\"valid\",\"loss\":1}\n"
      "{\"kind\":\"eval\",\"step\":30,\"split\":\"train\",\"loss\":0.5}\n",
      "log.jsonl");
  CurveOptions options;
  options.x = XQuantity::Tokens;
  options.metric = Metric::Perplexity;
  const RunCurves c = run_curves(log, options);
  ASSERT_EQ(c.train.size(), 1u);  // the step with a NaN loss (null in JSON) is left out
  EXPECT_DOUBLE_EQ(c.train[0].y, std::exp(3.0));
  ASSERT_EQ(c.valid.size(), 2u);  // the train-split eval is not the validation curve
  EXPECT_DOUBLE_EQ(c.valid[0].x, 1500);
  EXPECT_DOUBLE_EQ(c.valid[1].x, 3000);  // beyond the last step: extended along the last two
  EXPECT_DOUBLE_EQ(c.valid[1].y, std::exp(1.0));

  options.x = XQuantity::Time;  // no step record has time_s
  EXPECT_LINEA_ERROR(run_curves(log, options), "log.jsonl, line 1", "no 'time_s'");
}

// ---- scales ----

TEST(PlotAxis, NiceStepsAreOneTwoFiveTimesAPowerOfTen) {
  EXPECT_DOUBLE_EQ(nice_step(1), 1);
  EXPECT_DOUBLE_EQ(nice_step(0.13), 0.2);
  EXPECT_DOUBLE_EQ(nice_step(3), 5);
  EXPECT_DOUBLE_EQ(nice_step(7), 10);
  EXPECT_DOUBLE_EQ(nice_step(2e5), 2e5);
}

TEST(PlotAxis, LinearTicksAndLabels) {
  const Ticks t = linear_ticks(-0.05, 1.07, 6);
  EXPECT_DOUBLE_EQ(t.step, 0.2);
  ASSERT_EQ(t.values.size(), 6u);
  EXPECT_EQ(t.values[0], 0.0);  // exactly zero: the label is "0", not "-0.0"
  EXPECT_EQ(tick_labels(t), (std::vector<std::string>{"0", "0.2", "0.4", "0.6", "0.8", "1.0"}));
  EXPECT_EQ(tick_labels(linear_ticks(0, 1.2e6, 7)),
            (std::vector<std::string>{"0", "0.2M", "0.4M", "0.6M", "0.8M", "1.0M", "1.2M"}));
  EXPECT_EQ(tick_labels(linear_ticks(0, 40000, 5)), (std::vector<std::string>{"0", "10k", "20k", "30k", "40k"}));
  EXPECT_EQ(tick_labels(linear_ticks(0, 5000, 6)), (std::vector<std::string>{"0", "1000", "2000", "3000", "4000", "5000"}));
  for (int max_ticks : {2, 3, 5, 8, 13})
    EXPECT_LE(static_cast<int>(linear_ticks(0.37, 9.91, max_ticks).values.size()), max_ticks);
}

TEST(PlotAxis, LogTicks) {
  EXPECT_EQ(tick_labels(log_ticks(0.5, 200, 10)),
            (std::vector<std::string>{"0.5", "1", "2", "5", "10", "20", "50", "100", "200"}));
  EXPECT_EQ(tick_labels(log_ticks(1e-3, 1e6, 5)), (std::vector<std::string>{"0.001", "0.1", "10", "1k", "100k"}));
  // Less than a decade: round linear values, still placed on the log scale.
  const Ticks narrow = log_ticks(2.1, 4.9, 5);
  EXPECT_EQ(narrow.values, (std::vector<double>{3, 4}));
}

TEST(PlotAxis, PaddedRanges) {
  const Axis steps = padded_axis(0, 100, false, 0.04);
  EXPECT_DOUBLE_EQ(steps.lo, -4);
  EXPECT_DOUBLE_EQ(steps.hi, 104);
  EXPECT_DOUBLE_EQ(steps.fraction(50), 0.5);
  const Axis one = padded_axis(5, 5, false);
  EXPECT_LT(one.lo, 5);
  EXPECT_GT(one.hi, 5);
  const Axis log = padded_axis(1, 100, true, 0.05);
  EXPECT_NEAR(log.lo, std::pow(10, -0.1), 1e-12);
  EXPECT_NEAR(log.fraction(10), 0.5, 1e-12);
  EXPECT_LINEA_ERROR(padded_axis(0, 10, true), "log axis needs positive values");
}

// ---- rendering ----

TEST(PlotRender, TextAndLinesLandWhereExpected) {
  EXPECT_EQ(text_width("ab", 2), (2 * 6 - 1) * 2);
  Raster r(40, 20, {255, 255, 255});
  draw_text(r, 0, 0, "I", 1, {0, 0, 0});
  EXPECT_EQ(r.at(2, 3), (Color{0, 0, 0}));        // the stem of the I
  EXPECT_EQ(r.at(0, 3), (Color{255, 255, 255}));  // beside it
  r.line({10, 10.5}, {30, 10.5}, 3, {200, 0, 0});
  EXPECT_EQ(r.at(20, 10), (Color{200, 0, 0}));
  EXPECT_EQ(r.at(20, 15), (Color{255, 255, 255}));
}

bool has_color(const std::vector<uint8_t>& rgb, Color c) {
  for (size_t i = 0; i + 2 < rgb.size(); i += 3)
    if (rgb[i] == c.r && rgb[i + 1] == c.g && rgb[i + 2] == c.b) return true;
  return false;
}

uint32_t big_endian(const std::string& bytes, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<uint8_t>(bytes[at + i]);
  return v;
}

int run_linea(const std::vector<std::string>& args) { return cli::run_main(cli::linea_commands(), args); }

TEST(PlotRender, TwoRunsMakeAPngWithBothColors) {
  TempDir dir;
  write_text(dir / "runs/small/log.jsonl", synthetic_log(4, 300));
  write_text(dir / "runs/large/log.jsonl", synthetic_log(6, 200));
  const std::string out = dir / "curves.png";
  const int status = run_linea({"plot", dir / "runs/small", dir / "runs/large", "--out", out, "--width", "800",
                                "--height", "500", "--x", "tokens", "--smooth", "5"});
  if (!png_supported()) {
    EXPECT_EQ(status, cli::kExitFailure);  // "built without libpng; install libpng-dev and rebuild"
    return;
  }
  ASSERT_EQ(status, 0);
  std::ifstream in(out, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 33u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(bytes.substr(12, 4), "IHDR");  // the first chunk, after its 4-byte length
  EXPECT_EQ(big_endian(bytes, 16), 800u);
  EXPECT_EQ(big_endian(bytes, 20), 500u);
#ifdef LINEA_WITH_PNG
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  ASSERT_TRUE(png_image_begin_read_from_memory(&image, bytes.data(), bytes.size())) << image.message;
  image.format = PNG_FORMAT_RGB;
  std::vector<uint8_t> rgb(PNG_IMAGE_SIZE(image));
  ASSERT_TRUE(png_image_finish_read(&image, nullptr, rgb.data(), 0, nullptr)) << image.message;
  EXPECT_TRUE(has_color(rgb, {0, 114, 178}));  // the first run's blue
  EXPECT_TRUE(has_color(rgb, {213, 94, 0}));   // the second run's vermillion
  EXPECT_FALSE(has_color(rgb, {0, 158, 115}));  // no third run
#endif
}

TEST(PlotRender, ARunWithoutEvalsStillPlotsAndABadLogFails) {
  TempDir dir;
  write_text(dir / "no_evals/log.jsonl", "{\"kind\":\"step\",\"step\":1,\"loss\":3}\n{\"kind\":\"step\",\"step\":2,\"loss\":2.5}\n");
  write_text(dir / "corrupt/log.jsonl", "{\"kind\":\"step\",\"step\":1,\"loss\":3}\n{oops}\n");
  const int ok = run_linea({"plot", dir / "no_evals", "--out", dir / "a.png", "--log-y"});
  EXPECT_EQ(ok, png_supported() ? 0 : cli::kExitFailure);
  EXPECT_EQ(run_linea({"plot", dir / "no_evals", dir / "corrupt", "--out", dir / "b.png"}), cli::kExitFailure);
  EXPECT_FALSE(std::filesystem::exists(dir / "b.png"));
  EXPECT_EQ(run_linea({"plot", "--out", dir / "c.png"}), cli::kExitUsage);  // no run directory
}

TEST(PlotRender, ChartNeedsSomethingToDraw) {
  ChartSpec spec;
  spec.series.push_back({{{1, -1}, {2, 0}}, {0, 0, 0}, 1, 0, 1});
  spec.log_y = true;  // no positive value
  EXPECT_LINEA_ERROR(render_chart(spec), "nothing to draw");
}

}  // namespace
}  // namespace linea::plot
