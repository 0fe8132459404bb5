#pragma once
// Ranks as threads of one process, for the tests of dist/: each runs its part of a collective run
// against 127.0.0.1, and the test sees what each one threw.
#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dist/rendezvous.h"
#include "tensor/error.h"
#include "tests/dist/free_port.h"

namespace linea::testing {

inline dist::RendezvousOptions local_rendezvous(int port, int rank, int world_size, double timeout_s = 5) {
  return {dist::Endpoint{"127.0.0.1", port}, rank, world_size, timeout_s};
}

// Runs body(i) on threads i = 0..n-1 and returns what each threw ("" when it returned).
inline std::vector<std::string> run_threads(int n, const std::function<void(int)>& body) {
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      try {
        body(i);
      } catch (const std::exception& e) {
        errors[i] = e.what();
        if (errors[i].empty()) errors[i] = "an exception without a message";
      }
    });
  for (std::thread& t : threads) t.join();
  return errors;
}

// Every rank of a world joined over 127.0.0.1, indexed by rank.
inline std::vector<dist::Rendezvous> join_all(int world_size, double timeout_s = 5) {
  const int port = free_port();
  std::vector<std::optional<dist::Rendezvous>> joined(world_size);
  const auto errors = run_threads(world_size, [&](int rank) {
    joined[rank] = dist::Rendezvous::join(local_rendezvous(port, rank, world_size, timeout_s));
  });
  std::vector<dist::Rendezvous> ranks;
  for (int rank = 0; rank < world_size; ++rank) {
    if (!errors[rank].empty()) throw Error("join_all: rank " + std::to_string(rank) + ": " + errors[rank]);
    ranks.push_back(std::move(*joined[rank]));
  }
  return ranks;
}

}  // namespace linea::testing
