#include "tools/flags.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <sstream>

#include "tensor/number_text.h"

namespace linea::cli {

namespace {

// The whole text must be the number: "12abc" and "" are errors, not 12 and 0.
template <class T>
T parse_number(const std::string& text, const char* what) {
  T value{};
  const std::errc error = parse_whole_number(text, value);
  if (error == std::errc::result_out_of_range) throw std::invalid_argument(std::string(what) + " out of range");
  if (error != std::errc()) throw std::invalid_argument(std::string("expects ") + what);
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(value)) throw std::invalid_argument(std::string("expects ") + what);
  }
  return value;
}

bool parse_bool(const std::string& text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  throw std::invalid_argument("expects true or false");
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

bool looks_like_flag(const std::string& word) {
  if (word.size() < 2 || word[0] != '-') return false;
  // "-3" and "-.5" are values, not flags.
  return !(std::isdigit(static_cast<unsigned char>(word[1])) || word[1] == '.');
}

}  // namespace

std::string join(const std::vector<std::string>& words, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += separator;
    out += words[i];
  }
  return out;
}

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;  // farther than this is no hint
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_distance) best_distance = d, best = c;
  }
  return best;
}

Flags::Flags(std::string program, std::string description)
    : program_(std::move(program)), description_(std::move(description)) {}

void Flags::add_flag(Flag flag) {
  // Two flags of one name are a bug in the subcommand, not bad user input.
  if (flag.name.empty() || flag.name == "help" || find(flag.name) != nullptr)
    throw std::logic_error(program_ + ": flag --" + flag.name + " is registered twice or reserved");
  flags_.push_back(std::move(flag));
}

void Flags::add(const std::string& name, int* value, const std::string& help) {
  add_flag({name, "INT", help, std::to_string(*value), [value](const std::string& s) { *value = parse_number<int>(s, "an integer"); }});
}

void Flags::add(const std::string& name, int64_t* value, const std::string& help) {
  add_flag({name, "INT", help, std::to_string(*value),
            [value](const std::string& s) { *value = parse_number<int64_t>(s, "an integer"); }});
}

void Flags::add(const std::string& name, uint64_t* value, const std::string& help) {
  add_flag({name, "UINT", help, std::to_string(*value),
            [value](const std::string& s) { *value = parse_number<uint64_t>(s, "a non-negative integer"); }});
}

void Flags::add(const std::string& name, double* value, const std::string& help) {
  add_flag({name, "FLOAT", help, shortest_text(*value),
            [value](const std::string& s) { *value = parse_number<double>(s, "a number"); }});
}

void Flags::add(const std::string& name, float* value, const std::string& help) {
  add_flag({name, "FLOAT", help, shortest_text(*value), [value](const std::string& s) {
              const double v = parse_number<double>(s, "a number");
              if (std::abs(v) > std::numeric_limits<float>::max()) throw std::invalid_argument("number out of range");
              *value = static_cast<float>(v);
            }});
}

void Flags::add(const std::string& name, std::string* value, const std::string& help) {
  add_flag({name, "STR", help, value->empty() ? "none" : "\"" + *value + "\"",
            [value](const std::string& s) { *value = s; }});
}

void Flags::add(const std::string& name, bool* value, const std::string& help) {
  Flag flag{name, "", help, *value ? "true" : "false", [value](const std::string& s) { *value = parse_bool(s); }};
  flag.is_switch = true;
  add_flag(std::move(flag));
}

void Flags::add_choice(const std::string& name, std::string* value, std::vector<std::string> choices,
                       const std::string& help) {
  const std::string listed = join(choices, ", ");
  add_flag({name, std::string("{").append(join(choices, ",")).append("}"), help, *value, [value, choices, listed](const std::string& s) {
              if (std::find(choices.begin(), choices.end(), s) == choices.end())
                throw std::invalid_argument("must be one of " + listed);
              *value = s;
            }});
}

void Flags::add_positional(const std::string& name, std::string* value, const std::string& help) {
  positionals_.push_back({name, help, [value](const std::string& s) { *value = s; }});
}

void Flags::add_rest(const std::string& name, std::vector<std::string>* values, const std::string& help) {
  rest_ = {name, help, [values](const std::string& s) { values->push_back(s); }};
}

Flags::Flag* Flags::find(const std::string& name) {
  for (Flag& f : flags_)
    if (f.name == name) return &f;
  return nullptr;
}

bool Flags::has(const std::string& name) const {
  for (const Flag& f : flags_)
    if (f.name == name) return true;
  return false;
}

bool Flags::was_set(const std::string& name) const {
  for (const Flag& f : flags_)
    if (f.name == name) return f.seen;
  throw std::logic_error(program_ + ": was_set asks about --" + name + ", which is not a flag");
}

void Flags::fail(const std::string& message) const { throw UsageError(program_, program_ + ": " + message); }

void Flags::set_flag(Flag& flag, const std::string& spelled, const std::string& text) {
  try {
    flag.set(text);
  } catch (const std::invalid_argument& e) {
    fail(spelled + " " + e.what() + ", got '" + text + "'");
  }
  flag.seen = true;
}

bool Flags::parse(std::span<const std::string> args) { return parse(args, std::cout); }

bool Flags::parse(std::span<const std::string> args, std::ostream& help_out) {
  size_t positional_index = 0;
  auto take_positional = [&](const std::string& word) {
    if (positional_index < positionals_.size()) positionals_[positional_index++].set(word);
    else if (rest_.set) rest_.set(word);
    else fail("unexpected argument '" + word + "'");
  };

  bool flags_ended = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (flags_ended || !looks_like_flag(word)) {
      take_positional(word);
      continue;
    }
    if (word == "--") {
      flags_ended = true;
      continue;
    }
    if (word == "-h" || word == "--help") {
      help_out << usage();
      return false;
    }
    if (word.rfind("--", 0) != 0) fail("unknown flag " + word + " (flags are spelled --name)");

    const size_t equals = word.find('=');
    const std::string name = word.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    const std::string spelled = "--" + name;
    Flag* flag = find(name);
    if (flag == nullptr && name.rfind("no-", 0) == 0 && equals == std::string::npos) {
      Flag* negated = find(name.substr(3));
      if (negated != nullptr && negated->is_switch) {
        set_flag(*negated, spelled, "false");
        continue;
      }
    }
    if (flag == nullptr) {
      std::vector<std::string> names;
      for (const Flag& f : flags_) names.push_back(f.name);
      const std::string hint = closest_match(name, names);
      fail("unknown flag " + spelled + (hint.empty() ? std::string() : " (did you mean --" + hint + "?)"));
    }
    if (equals != std::string::npos) set_flag(*flag, spelled, word.substr(equals + 1));
    else if (flag->is_switch) set_flag(*flag, spelled, "true");
    else if (i + 1 < args.size()) set_flag(*flag, spelled, args[++i]);
    else fail(spelled + " needs a value (" + flag->metavar + ")");
  }
  if (positional_index < positionals_.size()) fail("missing argument " + positionals_[positional_index].name);
  return true;
}

std::string Flags::usage() const {
  std::ostringstream os;
  os << "usage: " << program_;
  if (!flags_.empty()) os << " [flags]";
  for (const Positional& p : positionals_) os << " " << p.name;
  if (rest_.set) os << " [" << rest_.name << "...]";
  os << "\n";
  if (!description_.empty()) os << "\n" << description_ << "\n";

  // Two columns: what to type, and what it does. A left side too wide for the column gets its
  // help on the next line rather than pushing every row to the right.
  constexpr size_t kColumn = 26;
  auto row = [&](const std::string& left, const std::string& help) {
    os << "  " << left;
    if (left.size() + 2 > kColumn) os << "\n" << std::string(kColumn + 2, ' ');
    else os << std::string(kColumn - left.size(), ' ');
    os << help << "\n";
  };
  if (!positionals_.empty() || rest_.set) {
    os << "\narguments:\n";
    for (const Positional& p : positionals_) row(p.name, p.help);
    if (rest_.set) row(rest_.name + "...", rest_.help);
  }
  os << "\nflags:\n";
  for (const Flag& f : flags_) {
    const std::string left = "--" + f.name + (f.is_switch ? std::string() : " " + f.metavar);
    row(left, f.help + " (default: " + f.default_text + ")");
  }
  row("-h, --help", "print this help and exit");
  return os.str();
}

}  // namespace linea::cli
