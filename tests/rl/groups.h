// Test helper: a collective group of `world` ranks, element r being rank r, of either kind:
// threads over shared memory, or TCP sockets on loopback (a real cross-process transport,
// here with threads as the processes).
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rl/collective/in_process_collective.h"
#include "rl/collective/tcp_collective.h"

namespace skyrl::rl::testing {

enum class GroupKind { kInProcess, kTcp };

inline std::string KindName(GroupKind k) { return k == GroupKind::kTcp ? "Tcp" : "InProcess"; }

inline std::vector<std::unique_ptr<Collective>> MakeGroup(GroupKind kind, int world,
                                                          absl::Duration timeout = absl::Seconds(30)) {
  if (kind == GroupKind::kInProcess || world == 1) return MakeInProcessGroup(world, timeout);
  std::vector<std::unique_ptr<Collective>> out(world);
  auto listener = TcpListener::Bind("127.0.0.1", 0);
  if (!listener.ok()) return {};
  std::vector<std::thread> threads;
  for (int r = 1; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto c = ConnectTcpCollective("127.0.0.1", (*listener)->port(), r, world, timeout);
      if (c.ok()) out[r] = std::move(*c);
    });
  }
  auto root = (*listener)->Accept(world, timeout);
  for (auto& t : threads) t.join();
  if (!root.ok()) return {};
  out[0] = std::move(*root);
  for (const auto& c : out) {
    if (!c) return {};
  }
  return out;
}

}  // namespace skyrl::rl::testing
