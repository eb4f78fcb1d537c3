// The head's managers in tests: a head::Head over a store, workers and clock the test owns
// (so a restart is a new Head over the same store), and the checks and helpers the head's
// tests share.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "runtime/common/clock.h"
#include "runtime/head/head.h"
#include "runtime/head/node_events.h"
#include "runtime/store/store.h"
#include "scheduler/invariants.h"
#include "tests/runtime/head/fake_workers.h"

namespace skyrl::head {

// A test head's options: the test token, a jobs folder `jobs` under the test's temporary
// folder, and port 0 (any free one) should it serve.
inline HeadOptions TestHeadOptions(const std::string& jobs) {
  HeadOptions options;
  options.port = 0;
  options.token = "head-test-token-0123456789abcdef";
  options.jobs_dir = ::testing::TempDir() + "/" + jobs;
  return options;
}

// One head incarnation, recovered from `store` (its nodes heartbeat every second, dead after
// five misses), not serving: tests call the managers directly or serve one service themselves.
inline std::unique_ptr<Head> OpenTestHead(store::Store& store, const Clock& clock, WorkerClient& workers,
                                          RetentionOptions retention = {}) {
  HeadOptions options = TestHeadOptions("head-test-jobs");
  options.retention = retention;
  absl::StatusOr<std::unique_ptr<Head>> head = Head::Open(options, store, workers, clock);
  EXPECT_TRUE(head.ok()) << head.status();
  return head.ok() ? std::move(*head) : nullptr;
}

// The scheduler's invariants over the head's tables: no device booked twice or beyond its
// node, and the tracker's accounting equal to what the tables hold.
inline absl::Status Check(Head& h) {
  std::vector<scheduler::NodeSpec> specs;
  for (const v1::NodeInfo& n : h.nodes().List())
    if (n.state() == v1::NODE_ALIVE) specs.push_back(ToNodeSpec(n));
  std::vector<scheduler::Allocation> recorded;
  for (const v1::ActorInfo& a : h.actors().List()) {
    if (a.state() != v1::ACTOR_PENDING && a.state() != v1::ACTOR_ALIVE) continue;
    bool grouped = !a.spec().placement_group_id().empty();
    recorded.push_back({a.actor_id(),
                        a.node_id(),
                        ToResources(a.spec().resources()),
                        {a.gpu_ids().begin(), a.gpu_ids().end()},
                        a.spec().placement_group_id(),
                        grouped ? a.bundle_index() : -1});
  }
  for (const v1::PlacementGroupInfo& g : h.groups().List()) {
    if (g.state() != v1::PG_CREATED && g.state() != v1::PG_RESCHEDULING) continue;
    for (int i = 0; i < g.bundles_size(); ++i)
      if (!g.bundles(i).node_id().empty())
        recorded.push_back({absl::StrCat(g.placement_group_id(), "#", i),
                            g.bundles(i).node_id(),
                            ToResources(g.spec().bundles(i).resources()),
                            {g.bundles(i).gpu_ids().begin(), g.bundles(i).gpu_ids().end()},
                            g.placement_group_id(),
                            i});
  }
  return h.resources().With(
      [&](const scheduler::Cluster& c) { return scheduler::CheckInvariants(specs, recorded, &c); });
}

// Keys of a store table, sorted.
inline std::vector<std::string> StoredKeys(store::Store& store, absl::string_view table) {
  std::vector<std::string> keys;
  absl::StatusOr<std::vector<store::Entry>> entries = store.Scan(table, "");
  EXPECT_TRUE(entries.ok()) << entries.status();
  if (entries.ok())
    for (const store::Entry& e : *entries) keys.push_back(e.key);
  std::sort(keys.begin(), keys.end());
  return keys;
}

// The retention bound: at most `keep` DEAD actors and `keep` REMOVED groups, and the store
// holds exactly the records the head does (an eviction leaves nothing behind in either).
inline absl::Status CheckRetention(Head& h, store::Store& store, size_t keep) {
  std::vector<std::string> actor_ids, group_ids;
  size_t dead = 0, removed = 0;
  for (const v1::ActorInfo& a : h.actors().List()) {
    actor_ids.push_back(a.actor_id());
    dead += a.state() == v1::ACTOR_DEAD;
  }
  for (const v1::PlacementGroupInfo& g : h.groups().List()) {
    group_ids.push_back(g.placement_group_id());
    removed += g.state() == v1::PG_REMOVED;
  }
  std::sort(actor_ids.begin(), actor_ids.end());
  std::sort(group_ids.begin(), group_ids.end());
  if (dead > keep) return absl::InternalError(absl::StrCat(dead, " DEAD actors kept, cap ", keep));
  if (removed > keep) return absl::InternalError(absl::StrCat(removed, " REMOVED groups kept, cap ", keep));
  if (StoredKeys(store, kActorsTable) != actor_ids)
    return absl::InternalError("the store's actor table differs from the head's");
  if (StoredKeys(store, kPlacementGroupsTable) != group_ids)
    return absl::InternalError("the store's placement group table differs from the head's");
  return absl::OkStatus();
}

inline void AddGpuNode(Head& head, int port, int gpus) {
  v1::NodeInfo info;
  info.set_address(absl::StrCat("127.0.0.1:", port));
  (*info.mutable_resources_total())["CPU"] = 64;
  (*info.mutable_resources_total())["GPU"] = gpus;
  for (int i = 0; i < gpus; ++i) info.add_gpu_ids(i);
  ASSERT_TRUE(head.nodes().Register(info).ok());
}

inline v1::ActorSpec Spec(const std::string& cls, double gpus, const std::string& name = "") {
  v1::ActorSpec spec;
  spec.set_class_name(cls);
  (*spec.mutable_resources())["GPU"] = gpus;
  spec.set_name(name);
  return spec;
}

// Every task the head's loop has been given has run, and what those gave it, demand passes
// included: the fake workers answer on the caller's thread, and their answers post to the
// loop.
inline void Settle(Head& h) {
  do h.loop().Run([] {});
  while (h.loop().stats().queued > 0 || h.demand().stats().busy);
}

// PlacementGroupManager::WaitAsync, blocking the test until it is settled.
inline absl::StatusOr<v1::PlacementGroupInfo> WaitFor(PlacementGroupManager& groups,
                                                      const PlacementGroupId& id, absl::Duration timeout) {
  absl::StatusOr<v1::PlacementGroupInfo> out = absl::UnknownError("WaitAsync never settled");
  absl::Notification done;
  groups.WaitAsync(id, timeout, [&](absl::StatusOr<v1::PlacementGroupInfo> g) {
    out = std::move(g);
    done.Notify();
  });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(timeout + absl::Seconds(10)));
  return out;
}

inline std::vector<absl::StatusOr<v1::ActorInfo>> CreateBatch(ActorManager& actors,
                                                              std::vector<v1::ActorSpec> specs) {
  std::vector<absl::StatusOr<v1::ActorInfo>> out;
  absl::Notification done;
  actors.CreateBatchAsync(std::move(specs), [&](std::vector<absl::StatusOr<v1::ActorInfo>> r) {
    out = std::move(r);
    done.Notify();
  });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  return out;
}

// The actor that `id` names once it is `state`, polled: restarts run on threads of their own.
inline absl::StatusOr<v1::ActorInfo> AwaitActorState(ActorManager& actors, const std::string& id,
                                                     v1::ActorState state) {
  absl::StatusOr<v1::ActorInfo> a;
  for (absl::Time end = absl::Now() + absl::Seconds(10); absl::Now() < end;
       absl::SleepFor(absl::Milliseconds(5))) {
    a = actors.Get(*ActorId::Parse(id));
    if (a.ok() && a->state() == state) return a;
  }
  return absl::DeadlineExceededError(
      absl::StrCat("actor ", id, " never became ", v1::ActorState_Name(state), ": ",
                   a.ok() ? v1::ActorState_Name(a->state()) : a.status().ToString()));
}

}  // namespace skyrl::head
