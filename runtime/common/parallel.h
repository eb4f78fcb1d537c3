// ParallelFor: a fan-out of blocking work (one RPC per actor, say) on a few threads, so that a
// slow or frozen peer costs its own timeout rather than everyone's in turn.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace skyrl {

// Runs fn(i) for every i in [0, n) on up to max_threads threads, the caller's among them, and
// returns when all have. fn must not throw; results go to slots indexed by i.
template <typename Fn>
void ParallelFor(size_t n, size_t max_threads, const Fn& fn) {
  if (n == 0) return;
  const size_t threads = std::clamp<size_t>(max_threads, 1, n);
  std::atomic<size_t> next{0};
  const auto run = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  std::vector<std::thread> helpers;
  helpers.reserve(threads - 1);
  for (size_t t = 1; t < threads; ++t) helpers.emplace_back(run);
  run();
  for (std::thread& t : helpers) t.join();
}

}  // namespace skyrl
