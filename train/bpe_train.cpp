// train_bpe: byte-pair merges learned incrementally.
//
// The text is reduced to its distinct pieces with their frequencies (a few MB of prose holds tens
// of thousands of distinct words), and the counts of adjacent pairs are kept up to date as merges
// happen instead of being recounted: merging (a, b) into c only changes pairs next to an (a, b)
// occurrence, and `where_` lists the words that may hold a pair, so each merge touches only the
// words that contain it. The most frequent pair comes from a max-heap whose stale entries (a count
// that has since changed) are skipped when popped.
#include <algorithm>
#include <queue>

#include "train/bpe_tokenizer.h"

namespace linea::train {

namespace {

struct Word {
  std::vector<int32_t> symbols;
  int64_t count;  // occurrences of the piece in the text
};

struct Candidate {
  int64_t count;
  uint64_t key;
};

// priority_queue keeps the largest on top: larger count first, then the smaller pair key (the
// smaller left id, then the smaller right id), so ties break the same way on every platform.
struct Precedes {
  bool operator()(const Candidate& x, const Candidate& y) const {
    return x.count != y.count ? x.count < y.count : x.key > y.key;
  }
};

class BpeTrainer {
 public:
  explicit BpeTrainer(std::string_view text) {
    std::unordered_map<std::string_view, int64_t> pieces;
    for (size_t start = 0; start < text.size();) {
      const size_t end = piece_end(text, start);
      ++pieces[text.substr(start, end - start)];
      start = end;
    }
    for (const auto& [piece, count] : pieces) {
      if (piece.size() < 2) continue;  // no pair to merge
      Word word{{}, count};
      for (const char c : piece) word.symbols.push_back(static_cast<unsigned char>(c));
      words_.push_back(std::move(word));
    }
    for (size_t w = 0; w < words_.size(); ++w) {
      const std::vector<int32_t>& s = words_[w].symbols;
      for (size_t i = 0; i + 1 < s.size(); ++i) add(pair_key(s[i], s[i + 1]), words_[w].count, static_cast<int32_t>(w));
    }
    for (const auto& [key, count] : counts_) heap_.push({count, key});
    touched_.clear();
  }

  // The most frequent pair and its count, or count 0 when no pair is left.
  Candidate best() {
    while (!heap_.empty()) {
      const Candidate top = heap_.top();
      const auto it = counts_.find(top.key);
      if (it != counts_.end() && it->second == top.count) return top;
      heap_.pop();
    }
    return {0, 0};
  }

  void merge(uint64_t key, int32_t new_id) {
    const auto left = static_cast<int32_t>(key >> 32), right = static_cast<int32_t>(key & 0xFFFFFFFFu);
    auto node = where_.extract(key);
    std::vector<int32_t> holders = node ? std::move(node.mapped()) : std::vector<int32_t>();
    std::sort(holders.begin(), holders.end());
    holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
    touched_.clear();
    for (const int32_t w : holders) merge_in_word(words_[w], w, left, right, new_id);
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
    for (const uint64_t k : touched_) {
      const auto it = counts_.find(k);
      if (it == counts_.end()) continue;
      if (it->second == 0) {
        counts_.erase(it);
      } else {
        heap_.push({it->second, k});
      }
    }
  }

 private:
  void add(uint64_t key, int64_t delta, int32_t word) {
    counts_[key] += delta;
    touched_.push_back(key);
    if (delta > 0) where_[key].push_back(word);
  }

  // Replaces the (left, right) occurrences of one word, left to right, and updates the counts of
  // the pairs that change: the old pairs touching a merged position go, the new pairs touching a
  // new symbol come. Pairs away from any merge are the same before and after.
  void merge_in_word(Word& word, int32_t w, int32_t left, int32_t right, int32_t new_id) {
    const std::vector<int32_t>& old = word.symbols;
    const size_t n = old.size();
    merged_.assign(n, 0);
    bool any = false;
    for (size_t i = 0; i + 1 < n;) {
      if (old[i] == left && old[i + 1] == right) {
        merged_[i] = merged_[i + 1] = 1;
        any = true;
        i += 2;
      } else {
        ++i;
      }
    }
    if (!any) return;  // a stale entry in where_: the pair was merged away by an earlier merge
    for (size_t i = 0; i + 1 < n; ++i)
      if (merged_[i] || merged_[i + 1]) add(pair_key(old[i], old[i + 1]), -word.count, w);
    std::vector<int32_t> fresh;
    fresh.reserve(n);
    for (size_t i = 0; i < n;) {
      fresh.push_back(merged_[i] ? new_id : old[i]);
      i += merged_[i] ? 2 : 1;
    }
    for (size_t i = 0; i + 1 < fresh.size(); ++i)
      if (fresh[i] == new_id || fresh[i + 1] == new_id) add(pair_key(fresh[i], fresh[i + 1]), word.count, w);
    word.symbols = std::move(fresh);
  }

  std::vector<Word> words_;
  std::unordered_map<uint64_t, int64_t> counts_;             // pair -> occurrences in the text
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;  // pair -> words that may hold it
  std::priority_queue<Candidate, std::vector<Candidate>, Precedes> heap_;
  std::vector<uint64_t> touched_;  // pairs whose count a merge changed
  std::vector<char> merged_;       // scratch: positions of a word covered by the current merge
};

}  // namespace

BpeTokenizer train_bpe(std::string_view text, int64_t vocab_size) {
  LINEA_CHECK(vocab_size >= 256, "train_bpe", "vocab_size ", vocab_size, " is below the 256 byte ids it starts from");
  BpeTrainer trainer(text);
  std::vector<BpeTokenizer::Pair> merges;
  while (256 + static_cast<int64_t>(merges.size()) < vocab_size) {
    const Candidate best = trainer.best();
    if (best.count < 2) break;
    const auto new_id = static_cast<int32_t>(256 + merges.size());
    merges.emplace_back(static_cast<int32_t>(best.key >> 32), static_cast<int32_t>(best.key & 0xFFFFFFFFu));
    trainer.merge(best.key, new_id);
  }
  return BpeTokenizer(std::move(merges));
}

}  // namespace linea::train
