#pragma once
// What an experiment of `linea paper` produces, gathered in memory and written at the end, so a
// failed run leaves no half-written report: Markdown (headings, paragraphs, tables), a JSON
// object of the measured numbers, and PNG charts drawn with tools/plot.
#include <string>
#include <vector>

#include "nn/json.h"
#include "tools/plot/chart.h"

namespace linea::cli::paper {

// A Markdown table: a header row, then rows of the same width.
class MarkdownTable {
 public:
  explicit MarkdownTable(std::vector<std::string> header);
  void add_row(std::vector<std::string> cells);  // linea::Error when its width differs
  std::string str() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// A number in a table: %.{digits}g, so 1e-5 and 47.2 both read well.
std::string format_number(double value, int digits = 4);

class Report {
 public:
  explicit Report(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }

  void heading(const std::string& text);    // "## text"
  void paragraph(const std::string& text);
  void table(const MarkdownTable& table);
  // A chart, written as DIR/<file> (a .png name) and linked from the Markdown.
  void figure(const std::string& file, const plot::ChartSpec& chart, const std::string& caption);
  json::Value& json() { return json_; }

  // Writes DIR/<name>.md, DIR/<name>.json and the figures; returns the paths written.
  std::vector<std::string> write(const std::string& dir) const;

 private:
  std::string name_;
  std::string markdown_;
  json::Value json_ = json::Value::object();
  std::vector<std::pair<std::string, plot::ChartSpec>> figures_;
};

// Colours the paper's figures tell apart.
inline constexpr plot::Color kBlue{31, 119, 180}, kOrange{255, 127, 14}, kGreen{44, 160, 44}, kRed{214, 39, 40},
    kPurple{148, 103, 189}, kGray{110, 110, 110};

}  // namespace linea::cli::paper
