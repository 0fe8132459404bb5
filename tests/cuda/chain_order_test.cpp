// The order in which the chunked scan's blocks pass the state along (cuda/kernels/chain_order.h),
// run on the host as the GPU runs it: blocks start in ticket order while there is room for them
// (a GPU holds only so many at once), and their steps (wait until the chain's slot carries the tag
// of their link, read what comes in, write what goes out with the next tag) interleave with the
// other blocks' at random. Every run ends (no block waits for one that cannot start), every block
// reads the value its chain's sequential scan has there, and no value is overwritten before it is
// read. Two wrong protocols show that the simulation catches what it checks. Runs without a GPU.
// (One thread's words stand for the block's: each thread of a block reads and writes its own.)
#include "cuda/kernels/chain_order.h"

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace linea::cuda::chunked {
namespace {

using Order = std::function<ChainPlace(int64_t ticket)>;
using Tags = std::function<uint32_t(int64_t position)>;

struct ChainRun {
  int64_t chains, chunks, resident;
  bool backward;
  // Persistent blocks (chunked_scan_kernels.cuh: for_block_chunk): `resident` blocks, each taking
  // chunk after chunk, asking for its next ticket at some moment while it works on one.
  bool persistent = false;
};

// Each chain's inputs (what enters its first link, each chunk's decay and update) and what the
// sequential scan has coming into each chunk.
struct ChainInputs {
  std::vector<double> start;
  std::vector<std::vector<double>> decay, update, expected;
};
ChainInputs draw_chains(const ChainRun& r, std::mt19937_64& gen) {
  std::uniform_real_distribution<double> draw(-1.0, 1.0);
  ChainInputs x{std::vector<double>(r.chains),
                std::vector<std::vector<double>>(r.chains, std::vector<double>(r.chunks))};
  x.update = x.expected = x.decay;
  for (int64_t c = 0; c < r.chains; ++c) {
    x.start[c] = draw(gen);
    for (int64_t n = 0; n < r.chunks; ++n) x.decay[c][n] = draw(gen), x.update[c][n] = draw(gen);
    double value = x.start[c];
    for (int64_t m = 0; m < r.chunks; ++m) {
      const int64_t n = links_before(m, r.chunks, r.backward);  // its own inverse: the chunk at position m
      x.expected[c][n] = value;
      value = x.decay[c][n] * value + x.update[c][n];
    }
  }
  return x;
}

struct Block {
  ChainPlace place;
  int phase;  // the protocol's step it is at
  double in;  // what it read
  int64_t held = -1;  // a persistent block's next ticket, once asked for
};

// Runs every block once: they start in ticket order while fewer than r.resident are running, and
// one random action at a time is taken among starting the next block and letting a block that
// can (`can_go`) take its step (`step`: false with `failure` set when it went wrong). A block is
// done once its phase reaches `phases`. Persistent blocks (r.persistent): r.resident of them start,
// and one more kind of action is a block's asking for its next ticket (at the latest when its
// chunk is done); a block done with its chunk takes the held ticket's chunk, or stops when the
// tickets have run out.
::testing::AssertionResult run_blocks(const ChainRun& r, const Order& order, std::mt19937_64& gen, int phases,
                                      const std::function<bool(const Block&)>& can_go,
                                      const std::function<bool(Block&, std::string& failure)>& step) {
  std::vector<Block> active;
  int64_t next_ticket = 0, finished = 0, started = 0;
  const int64_t blocks = r.chains * r.chunks;
  while (finished < blocks) {
    std::vector<int64_t> can_step, can_ask;
    for (size_t b = 0; b < active.size(); ++b) {
      if (can_go(active[b])) can_step.push_back(static_cast<int64_t>(b));
      if (r.persistent && active[b].held < 0) can_ask.push_back(static_cast<int64_t>(b));
    }
    const int64_t running = r.persistent ? started : static_cast<int64_t>(active.size());
    const bool can_start = next_ticket < blocks && running < r.resident;
    if (can_step.empty() && !can_start)
      return ::testing::AssertionFailure()
             << "deadlock: " << active.size() << " blocks wait, " << blocks - next_ticket << " never started";
    const int64_t steps = static_cast<int64_t>(can_step.size()), asks = static_cast<int64_t>(can_ask.size());
    const int64_t choice = std::uniform_int_distribution<int64_t>(0, steps + asks - !can_start)(gen);
    if (choice == steps + asks) {
      active.push_back({order(next_ticket++), 0, 0.0});
      ++started;
      continue;
    }
    if (choice >= steps) {
      active[can_ask[choice - steps]].held = next_ticket++;
      continue;
    }
    Block& k = active[can_step[choice]];
    std::string failure;
    if (!step(k, failure)) return ::testing::AssertionFailure() << failure;
    if (++k.phase == phases) {
      ++finished;
      if (r.persistent && k.held < 0) k.held = next_ticket++;
      if (r.persistent && k.held < blocks) k = {order(k.held), 0, 0.0};
      else active.erase(active.begin() + can_step[choice]);
    }
  }
  return ::testing::AssertionSuccess();
}

// Runs the protocol once with the given order of tickets and tag a block waits for; the failure
// says what went wrong. Phases: 0 waits for the tag and reads, 1 writes.
::testing::AssertionResult simulate(const ChainRun& r, const Order& order, uint64_t seed, const Tags& tag = link_tag) {
  std::mt19937_64 gen(seed);
  const ChainInputs x = draw_chains(r, gen);
  struct Slot {
    double value = 0.0;
    uint32_t tag = 0;  // zeroed before the launch
    bool unread = false;
  };
  std::vector<Slot> slot(r.chains);
  auto position_of = [&](const Block& k) { return links_before(k.place.chunk, r.chunks, r.backward); };
  auto can_go = [&](const Block& k) {
    return k.phase > 0 || position_of(k) == 0 || slot[k.place.chain].tag == tag(position_of(k));
  };
  auto step = [&](Block& k, std::string& failure) {
    const int64_t c = k.place.chain, n = k.place.chunk, position = position_of(k);
    Slot& at = slot[c];
    if (k.phase == 0) {
      if (position > 0) {
        k.in = at.value;
        at.unread = false;
      } else {
        k.in = x.start[c];
      }
      if (k.in != x.expected[c][n]) {
        failure = "chain " + std::to_string(c) + " chunk " + std::to_string(n) + " read " + std::to_string(k.in) +
                  ", expected " + std::to_string(x.expected[c][n]);
        return false;
      }
    } else if (position + 1 < r.chunks) {  // the chain's last value goes out of the chain
      if (at.unread) {
        failure = "chain " + std::to_string(c) + " chunk " + std::to_string(n) + " overwrote a value not yet read";
        return false;
      }
      at = {x.decay[c][n] * k.in + x.update[c][n], link_tag(position + 1), true};
    }
    return true;
  };
  return run_blocks(r, order, gen, 2, can_go, step);
}

Order tickets(const ChainRun& r) {
  return [r](int64_t t) { return ticket_place(t, r.chains, r.chunks, r.backward); };
}

TEST(ChainOrder, EveryRunEndsAndReadsTheSequentialScan) {
  uint64_t seed = 1;
  for (const bool persistent : {false, true})
    for (const bool backward : {false, true})
      for (const int64_t chains : {1, 3, 8})
        for (const int64_t chunks : {1, 2, 7, 40})
          for (const int64_t resident : {1, 2, 5, 64}) {
            const ChainRun r{chains, chunks, resident, backward, persistent};
            for (int repeat = 0; repeat < 40; ++repeat)
              EXPECT_TRUE(simulate(r, tickets(r), seed++))
                  << (persistent ? "persistent " : "") << (backward ? "backward" : "forward") << " chains=" << chains
                  << " chunks=" << chunks << " resident=" << resident;
          }
}

// Blocks taking their chunks in blockIdx order (a chain's chunks one after another, the first
// chunk first): backward, a chain's first link is its last chunk, and with fewer blocks resident
// than chunks the blocks that started wait for one that cannot start.
TEST(ChainOrder, BlockIndexOrderDeadlocksBackward) {
  const ChainRun r{2, 8, 4, true};
  const ::testing::AssertionResult result = simulate(
      r,
      [&](int64_t t) {
        return ChainPlace{t / r.chunks, t % r.chunks};
      },
      7);
  ASSERT_FALSE(result);
  EXPECT_NE(std::string(result.message()).find("deadlock"), std::string::npos) << result.message();
}

// A block that takes the tag of the link before its own reads a value that is not yet its chunk's
// in some interleaving (at the chain's second link, the zeroed slot).
TEST(ChainOrder, TakingTheTagOfTheLinkBeforeIsCaught) {
  for (const bool persistent : {false, true})
    for (const bool backward : {false, true}) {
      const ChainRun r{2, 6, 4, backward, persistent};
      const Tags one_before = [](int64_t position) { return link_tag(position - 1); };
      bool caught = false;
      for (uint64_t seed = 0; seed < 50 && !caught; ++seed) caught = !simulate(r, tickets(r), seed, one_before);
      EXPECT_TRUE(caught) << (persistent ? "persistent " : "") << (backward ? "backward" : "forward");
    }
}

// The automatic choice follows the measurements behind it (chain_order.h): on 132 SMs the chain
// from 8 chains on, the kernels below; and more chains, or fewer SMs, never turn it back.
TEST(ChainOrder, TheChainIsChosenFromTheFewestChainsMeasured) {
  EXPECT_FALSE(chain_pays(1, 132));
  EXPECT_FALSE(chain_pays(7, 132));
  EXPECT_TRUE(chain_pays(8, 132));
  EXPECT_TRUE(chain_pays(16, 132));
  EXPECT_TRUE(chain_pays(64, 132));
  for (const int64_t sms : {1, 24, 108, 132, 144})
    for (int64_t chains = 1; chains < 512; ++chains) {
      if (chain_pays(chains, sms)) EXPECT_TRUE(chain_pays(chains + 1, sms)) << chains << " chains, " << sms << " SMs";
      if (chain_pays(chains, sms + 1)) EXPECT_TRUE(chain_pays(chains, sms)) << chains << " chains, " << sms << " SMs";
    }
}

}  // namespace
}  // namespace linea::cuda::chunked
