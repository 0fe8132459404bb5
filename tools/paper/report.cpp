#include "tools/paper/report.h"

#include <cstdio>
#include <filesystem>

#include "tensor/error.h"
#include "tools/plot/png_writer.h"
#include "train/file_io.h"

namespace linea::cli::paper {

MarkdownTable::MarkdownTable(std::vector<std::string> header) : header_(std::move(header)) {}

void MarkdownTable::add_row(std::vector<std::string> cells) {
  LINEA_CHECK(cells.size() == header_.size(), "paper.table", "a row of ", cells.size(), " cells under a header of ",
              header_.size());
  rows_.push_back(std::move(cells));
}

std::string MarkdownTable::str() const {
  auto line = [](const std::vector<std::string>& cells) {
    std::string s = "|";
    for (const std::string& c : cells) s += " " + c + " |";
    return s + "\n";
  };
  std::string s = line(header_);
  s += "|";
  for (size_t i = 0; i < header_.size(); ++i) s += " --- |";
  s += "\n";
  for (const auto& row : rows_) s += line(row);
  return s;
}

std::string format_number(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, value);
  return buf;
}

void Report::heading(const std::string& text) { markdown_ += "## " + text + "\n\n"; }
void Report::paragraph(const std::string& text) { markdown_ += text + "\n\n"; }
void Report::table(const MarkdownTable& table) { markdown_ += table.str() + "\n"; }

void Report::figure(const std::string& file, const plot::ChartSpec& chart, const std::string& caption) {
  figures_.emplace_back(file, chart);
  markdown_ += "![" + caption + "](" + file + ")\n\n" + caption + "\n\n";
}

std::vector<std::string> Report::write(const std::string& dir) const {
  std::filesystem::create_directories(dir);
  std::vector<std::string> written;
  // Figures first: they are what can fail (no libpng), and then nothing claims to show them.
  for (const auto& [file, chart] : figures_) {
    const std::string path = (std::filesystem::path(dir) / file).string();
    plot::write_png(path, plot::render_chart(chart));
    written.push_back(path);
  }
  const std::string md = (std::filesystem::path(dir) / (name_ + ".md")).string();
  train::write_file_atomically(md, "# linea paper " + name_ + "\n\n" + markdown_);
  written.push_back(md);
  const std::string js = (std::filesystem::path(dir) / (name_ + ".json")).string();
  train::write_file_atomically(js, json::dump(json_, 2) + "\n");
  written.push_back(js);
  return written;
}

}  // namespace linea::cli::paper
