// The order in which the chunked scan's blocks pass the state along (cuda/kernels/chain_order.h),
// run on the host as the GPU runs it: blocks start in ticket order while there is room for them
// (a GPU holds only so many at once), and their steps (wait for the links before theirs, read what
// comes in, write what goes out, publish) interleave with the other blocks' at random. Every run
// ends (no block waits for one that cannot start), every block reads the value its chain's
// sequential scan has there, and no slot of a ring is overwritten before it is read. Two wrong
// orders show that the simulation catches what it checks. Runs without a GPU.
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
using Links = std::function<int64_t(int64_t chunk, int64_t chunks, bool backward)>;

struct ChainRun {
  int64_t chains, chunks, slots, resident;
  bool backward;
};

// Runs the protocol once with the given order of tickets and count of the links a block waits for;
// the failure says what went wrong.
::testing::AssertionResult simulate(const ChainRun& r, const Order& order, uint64_t seed,
                                    const Links& links = links_before) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> draw(-1.0, 1.0);
  // Each chain's inputs: what enters its first link, and each chunk's decay and update.
  std::vector<double> start(r.chains);
  std::vector<std::vector<double>> decay(r.chains, std::vector<double>(r.chunks)), update = decay, expected = decay;
  for (int64_t c = 0; c < r.chains; ++c) {
    start[c] = draw(gen);
    for (int64_t n = 0; n < r.chunks; ++n) decay[c][n] = draw(gen), update[c][n] = draw(gen);
    double x = start[c];  // the sequential scan: what comes into each chunk
    for (int64_t k = 0; k < r.chunks; ++k) {
      const int64_t n = r.backward ? r.chunks - 1 - k : k;
      expected[c][n] = x;
      x = decay[c][n] * x + update[c][n];
    }
  }
  std::vector<std::vector<double>> slot(r.chains, std::vector<double>(r.slots, 0.0));
  std::vector<std::vector<bool>> unread(r.chains, std::vector<bool>(r.slots, false));
  std::vector<int64_t> published(r.chains, 0);
  struct Block {
    ChainPlace place;
    int phase;  // 0 waits, 1 reads, 2 writes, 3 publishes
    double in;
  };
  std::vector<Block> active;
  int64_t next_ticket = 0, finished = 0;
  const int64_t blocks = r.chains * r.chunks;
  while (finished < blocks) {
    // The actions possible now: start the next ticket's block, or step a block that can go on.
    std::vector<int64_t> can_step;
    for (size_t b = 0; b < active.size(); ++b) {
      const Block& k = active[b];
      if (k.phase > 0 || published[k.place.chain] >= links(k.place.chunk, r.chunks, r.backward))
        can_step.push_back(static_cast<int64_t>(b));
    }
    const bool can_start = next_ticket < blocks && static_cast<int64_t>(active.size()) < r.resident;
    if (can_step.empty() && !can_start)
      return ::testing::AssertionFailure()
             << "deadlock: " << active.size() << " blocks wait, " << blocks - next_ticket << " never started";
    const int64_t choice =
        std::uniform_int_distribution<int64_t>(0, static_cast<int64_t>(can_step.size()) - !can_start)(gen);
    if (choice == static_cast<int64_t>(can_step.size())) {
      active.push_back({order(next_ticket++), 0, 0.0});
      continue;
    }
    Block& k = active[can_step[choice]];
    const int64_t c = k.place.chain, n = k.place.chunk, step = links_before(n, r.chunks, r.backward);
    const int64_t in = slot_in(n, r.slots), out = slot_out(n, r.slots, r.backward);
    if (k.phase == 1) {
      if (step > 0) {
        k.in = slot[c][in];
        unread[c][in] = false;
      } else {
        k.in = start[c];
      }
      if (k.in != expected[c][n])
        return ::testing::AssertionFailure()
               << "chain " << c << " chunk " << n << " read " << k.in << ", expected " << expected[c][n];
    } else if (k.phase == 2) {
      if (unread[c][out])
        return ::testing::AssertionFailure()
               << "chain " << c << " chunk " << n << " overwrote slot " << out << " before it was read";
      slot[c][out] = decay[c][n] * k.in + update[c][n];
      unread[c][out] = step + 1 < r.chunks;  // the chain's last value goes out of the chain, unread
    } else if (k.phase == 3) {
      published[c] = step + 1;
      active.erase(active.begin() + can_step[choice]);
      ++finished;
      continue;
    }
    ++k.phase;
  }
  return ::testing::AssertionSuccess();
}

Order tickets(const ChainRun& r) {
  return [r](int64_t t) { return ticket_place(t, r.chains, r.chunks, r.backward); };
}

TEST(ChainOrder, EveryRunEndsAndReadsTheSequentialScan) {
  uint64_t seed = 1;
  for (const bool backward : {false, true})
    for (const int64_t chains : {1, 3, 8})
      for (const int64_t chunks : {1, 2, 7, 40})
        for (const int64_t resident : {1, 2, 5, 64})
          for (const int64_t slots : {int64_t{2}, chunks + 1}) {
            if (backward && slots != 2) continue;  // the gradients go through the ring only
            const ChainRun r{chains, chunks, slots, resident, backward};
            for (int repeat = 0; repeat < 20; ++repeat)
              EXPECT_TRUE(simulate(r, tickets(r), seed++))
                  << (backward ? "backward" : "forward") << " chains=" << chains << " chunks=" << chunks
                  << " slots=" << slots << " resident=" << resident;
          }
}

// Blocks taking their chunks in blockIdx order (a chain's chunks one after another, the first
// chunk first): backward, a chain's first link is its last chunk, and with fewer blocks resident
// than chunks the blocks that started wait for one that cannot start.
TEST(ChainOrder, BlockIndexOrderDeadlocksBackward) {
  const ChainRun r{2, 8, 2, 4, true};
  const ::testing::AssertionResult result = simulate(
      r,
      [&](int64_t t) {
        return ChainPlace{t / r.chunks, t % r.chunks};
      },
      7);
  ASSERT_FALSE(result);
  EXPECT_NE(std::string(result.message()).find("deadlock"), std::string::npos) << result.message();
}

// A block that waits for one link fewer than it should reads before its predecessor wrote (or
// overwrites a slot not yet read) in some interleaving.
TEST(ChainOrder, WaitingForTooFewLinksIsCaught) {
  for (const bool backward : {false, true}) {
    const ChainRun r{2, 6, 2, 4, backward};
    const Links too_few = [](int64_t chunk, int64_t chunks, bool back) {
      return std::max<int64_t>(0, links_before(chunk, chunks, back) - 1);
    };
    bool caught = false;
    for (uint64_t seed = 0; seed < 50 && !caught; ++seed) caught = !simulate(r, tickets(r), seed, too_few);
    EXPECT_TRUE(caught) << (backward ? "backward" : "forward");
  }
}

// The automatic choice follows the measurements behind it (chain_order.h): on 132 SMs the kernels
// for 8 and 16 chains, the chain from 32 on; and more chains, or fewer SMs, never turn it back.
TEST(ChainOrder, TheChainIsChosenWhenItsChainsFillTheGpu) {
  EXPECT_FALSE(chain_pays(8, 132));
  EXPECT_FALSE(chain_pays(16, 132));
  EXPECT_TRUE(chain_pays(32, 132));
  EXPECT_TRUE(chain_pays(64, 132));
  for (const int64_t sms : {1, 24, 108, 132, 144})
    for (int64_t chains = 1; chains < 512; ++chains) {
      if (chain_pays(chains, sms)) EXPECT_TRUE(chain_pays(chains + 1, sms)) << chains << " chains, " << sms << " SMs";
      if (chain_pays(chains, sms + 1)) EXPECT_TRUE(chain_pays(chains, sms)) << chains << " chains, " << sms << " SMs";
    }
}

}  // namespace
}  // namespace linea::cuda::chunked
