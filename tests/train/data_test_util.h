#pragma once
// Inputs shared by the data-side tests (tokenizers, corpora, caches, batchers).
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace linea::testing {

// A plain (non-atomic) write: tests use it to plant exactly the bytes they want, damage included.
inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline std::string random_bytes(std::mt19937_64& rng, size_t n) {
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(rng() & 0xFF);
  return bytes;
}

// Scripts and widths UTF-8 has to get right: 1- to 4-byte sequences, combining marks, right-to-left
// text, emoji with a zero-width joiner, and a control character.
inline const std::string& multilingual_text() {
  static const std::string text =
      "The quick brown fox, naïve café, Œuvre.\n"
      "Ελληνικά: Η γρήγορη καφέ αλεπού.\n"
      "Русский: съешь же ещё этих мягких французских булок.\n"
      "中文：快速的棕色狐狸跳过了懒狗。日本語：いろはにほへと。한국어: 다람쥐 헌 쳇바퀴에 타고파\n"
      "العربية: نص تجريبي. עברית: טקסט לדוגמה.\n"
      "हिन्दी: नमस्ते दुनिया। ไทย: สวัสดีชาวโลก\n"
      "e\u0301 (e + combining acute), 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛, emoji: 👩‍💻 🎉 🇫🇷\n"
      "tab\there, bell\x07, trailing spaces   \n";
  return text;
}

// Words from a small vocabulary with a skewed (Zipf-like) frequency, as natural text has.
inline std::string zipf_text(std::mt19937_64& rng, size_t words) {
  static const std::vector<std::string> vocab = {"the", "of", "and", "to", "in", "a", "is", "that", "for", "it",
                                                 "was", "on", "with", "as", "by", "language", "model", "tensor",
                                                 "gradient", "attention", "naïve", "ünïcode", "42", "3.14", "!"};
  std::string text;
  for (size_t i = 0; i < words; ++i) {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    const size_t rank = static_cast<size_t>(static_cast<double>(vocab.size()) * u * u * u);
    text += vocab[std::min(rank, vocab.size() - 1)];
    text += (i % 13 == 12) ? "\n" : " ";
  }
  return text;
}

}  // namespace linea::testing
