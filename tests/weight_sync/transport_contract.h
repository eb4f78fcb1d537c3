// The contract every Transport keeps, as one value-parameterized suite: a test binary includes
// this header once and instantiates TransportContractTest with its kinds
// (transport_contract_test.cc: TCP; nccl_transport_contract_test.cc: NCCL). Ranks are threads;
// the rendezvous is in memory.
//
// A kind says how its endpoints are made (one at a time, or all at once where creation is
// collective), whether this machine can run a world (NCCL: one CUDA device per rank; the test
// skips saying why), and how a failure spreads: TCP's pairs are independent connections, so a
// rank's failure fails only its own pairs and each status names the one peer; a shared-fate
// transport (NCCL: one communicator, aborted on any failure) may fail every rank of the sync,
// each by its own timeout, and its endpoints are recreated before the next sync.
#pragma once

#include <atomic>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/weight_sync/sync_harness.h"
#include "weight_sync/plan/hf_params.h"
#include "weight_sync/rendezvous.h"
#include "weight_sync/transport.h"

namespace skyrl::weight_sync::contract {

using ::testing::AllOf;
using ::testing::AnyOf;
using testing::ForEachMatrixEngines;
using ::testing::HasSubstr;
using testing::MakeWorld;
using testing::MatrixTrainer;
using testing::MatrixTrainers;
using testing::RunSync;
using testing::World;

struct TransportKind {
  std::string name;
  // One endpoint: receiver_rank -1 for a sender. Used unless make_all is set.
  std::function<absl::StatusOr<std::unique_ptr<Transport>>(Rendezvous*, int, const TransferOptions&)> make;
  // Every endpoint of a world at once, senders then receivers, for kinds whose creation is
  // collective. `generation` is new for every call on the same rendezvous.
  std::function<absl::StatusOr<std::vector<std::unique_ptr<Transport>>>(
      const World&, Rendezvous*, const TransferOptions&, uint64_t generation)>
      make_all;
  // Why this machine cannot run a world of `ranks` endpoints (e.g. "needs 5 CUDA devices, found
  // 1"); unset or "": it can.
  std::function<std::string(int ranks)> missing;
  // A failure may fail every rank of the sync and spoils every endpoint (see above).
  bool shared_fate = false;
};

inline TransferOptions TestOptions() {
  TransferOptions o;
  o.bucket_bytes = 4096;  // many buckets per stream
  o.chunk_bytes = 1000;   // chunks that cut runs mid-way
  o.checksums = true;
  o.io_timeout = absl::Seconds(10);
  return o;
}

class TransportContractTest : public ::testing::TestWithParam<TransportKind> {
 protected:
  struct Endpoints {
    std::vector<std::unique_ptr<Transport>> owned;
    std::vector<Transport*> senders, receivers;
    std::vector<std::unique_ptr<VersionedShard>> shards;
  };
  // Fresh endpoints for every rank of `w`, receivers' shards at version 0 (zeros). An endpoint
  // that cannot be created fails the test and is left null (RunSync then leaves it out).
  Endpoints Make(const World& w, const TransferOptions& o, Rendezvous& rdv) {
    Endpoints e;
    for (int r = 0; r < w.plan.num_receivers; ++r)
      e.shards.push_back(std::make_unique<VersionedShard>(w.rlayout[r].Bytes()));
    Create(w, o, rdv, e);
    return e;
  }
  // After a failed sync, before the next one: a shared-fate kind's endpoints are spoiled (its
  // communicator aborted), so every one is created anew; the receivers' shards stay.
  void AfterFailure(const World& w, const TransferOptions& o, Rendezvous& rdv, Endpoints& e) {
    if (GetParam().shared_fate) Create(w, o, rdv, e);
  }
  // Skips the test when this machine cannot run every rank of `w` (for NCCL: one CUDA device
  // per rank). The caller returns when IsSkipped().
  void SkipUnlessRunnable(const World& w) {
    if (std::string why = Missing(w); !why.empty()) GTEST_SKIP() << why;
  }
  std::string Missing(const World& w) const {
    return GetParam().missing ? GetParam().missing(w.plan.num_senders + w.plan.num_receivers) : "";
  }
  // Matches a failure that names `side` ("sender"/"receiver") `peer`: TCP names the one
  // connection that failed ("receiver 0", "sender(s) 0"); a shared-fate transport waits on all
  // its peers at once and lists them ("(receivers 0, 1)").
  ::testing::Matcher<std::string> NamesPeer(absl::string_view side, int peer) const {
    if (GetParam().shared_fate)
      return ::testing::ContainsRegex(absl::StrCat(side, "s ([0-9]+, )*", peer, "[,)]"));
    return ::testing::ContainsRegex(absl::StrCat(side, "(\\(s\\))? ", peer, "([^0-9]|$)"));
  }
  std::vector<std::vector<uint8_t>> SenderShards(const World& w,
                                                 const std::vector<std::vector<uint8_t>>& weights) {
    std::vector<std::vector<uint8_t>> out;
    for (int s = 0; s < w.plan.num_senders; ++s) out.push_back(w.SenderShard(s, weights));
    return out;
  }

 private:
  // (Re)creates every endpoint of `e`; the old ones are destroyed first.
  void Create(const World& w, const TransferOptions& o, Rendezvous& rdv, Endpoints& e) {
    e.owned.clear();
    e.senders.assign(w.plan.num_senders, nullptr);
    e.receivers.assign(w.plan.num_receivers, nullptr);
    const TransportKind& kind = GetParam();
    if (kind.make_all) {
      auto all = kind.make_all(w, &rdv, o, generation_++);
      EXPECT_TRUE(all.ok()) << all.status();
      if (!all.ok()) return;
      EXPECT_EQ(all->size(), e.senders.size() + e.receivers.size());
      e.owned = std::move(*all);
    } else {
      for (int g = 0; g < w.plan.num_senders + w.plan.num_receivers; ++g) {
        auto t = kind.make(&rdv, g < w.plan.num_senders ? -1 : g - w.plan.num_senders, o);
        EXPECT_TRUE(t.ok()) << t.status();
        e.owned.push_back(t.ok() ? std::move(*t) : nullptr);
      }
    }
    for (size_t g = 0; g < e.owned.size() && g < e.senders.size() + e.receivers.size(); ++g)
      (g < e.senders.size() ? e.senders[g] : e.receivers[g - e.senders.size()]) = e.owned[g].get();
  }
  uint64_t generation_ = 0;  // of make_all's endpoints within this test
};

inline Model SmallDense() {
  TransformerConfig c;
  c.layers = 4;
  c.hidden = 32;
  c.intermediate = 64;
  c.heads = 4;
  c.kv_heads = 2;  // TP4 replicates KV heads
  c.head_dim = 8;
  c.vocab = 96;
  return MakeTransformer(c);
}

inline Model SmallMoe() {
  TransformerConfig c;
  c.layers = 2;
  c.hidden = 32;
  c.heads = 4;
  c.kv_heads = 4;
  c.head_dim = 8;
  c.vocab = 64;
  c.experts = 8;
  c.moe_intermediate = 16;
  return MakeTransformer(c);
}

// The matrix: trainer TP{1,2,4} x PP{1,2}, plus EP for a small MoE and FSDP, to
// inference TP{1,2,4} x 1-3 engines; every receiver shard equals the slice cut from the model.
TEST_P(TransportContractTest, EveryReceiverShardEqualsItsSliceOfTheModel) {
  int syncs = 0, unrunnable = 0;
  std::string why_not;
  for (const MatrixTrainer& t : MatrixTrainers())
    ForEachMatrixEngines(t, [&](Layout engines, std::string where) {
      if (::testing::Test::HasFatalFailure()) return;
      auto w = MakeWorld(t.moe ? SmallMoe() : SmallDense(), t.layout, std::move(engines));
      ASSERT_TRUE(w.ok()) << where << ": " << w.status();
      if (std::string why = Missing(**w); !why.empty()) {  // too many ranks for this machine
        ++unrunnable;
        why_not = why;
        return;
      }
      InMemoryRendezvous rdv;
      Endpoints e = Make(**w, TestOptions(), rdv);
      auto weights = (*w)->Weights(1);
      auto res = RunSync(**w, 1, SenderShards(**w, weights), e.senders, e.receivers, e.shards);
      ASSERT_EQ(res.FirstError(), "") << where;
      for (int r = 0; r < (*w)->plan.num_receivers; ++r) {
        VersionedShard::Snapshot snap = e.shards[r]->Current();
        ASSERT_EQ(snap.version, 1u) << where;
        ASSERT_TRUE(*snap.bytes == (*w)->Expected(r, weights)) << where << ": receiver " << r;
      }
      ++syncs;
    });
  if (syncs == 0) GTEST_SKIP() << "no layout pair of the matrix runs here: " << why_not;
  if (unrunnable > 0) std::cout << "ran " << syncs << " of the 72 syncs; the others: " << why_not << "\n";
  EXPECT_EQ(syncs + unrunnable, 72);
}

// Five versions a small step apart (what a transport with deltas sends as deltas), on every
// layout pair: each arrives exact.
TEST_P(TransportContractTest, FiveVersionsOfSmallStepsArriveExact) {
  int syncs = 0;
  for (const MatrixTrainer& t : MatrixTrainers())
    ForEachMatrixEngines(t, [&](Layout engines, std::string where) {
      if (::testing::Test::HasFatalFailure()) return;
      auto w = MakeWorld(t.moe ? SmallMoe() : SmallDense(), t.layout, std::move(engines));
      ASSERT_TRUE(w.ok()) << where << ": " << w.status();
      if (!Missing(**w).empty()) return;
      InMemoryRendezvous rdv;
      Endpoints e = Make(**w, TestOptions(), rdv);
      auto weights = (*w)->Weights(1);
      for (uint64_t v = 1; v <= 5; ++v) {
        if (v > 1) weights = testing::SmallStep(std::move(weights), 61 + v);
        auto res = RunSync(**w, v, SenderShards(**w, weights), e.senders, e.receivers, e.shards);
        ASSERT_EQ(res.FirstError(), "") << where << " version " << v;
        for (int r = 0; r < (*w)->plan.num_receivers; ++r)
          ASSERT_TRUE(*e.shards[r]->Current().bytes == (*w)->Expected(r, weights))
              << where << ": receiver " << r << " version " << v;
      }
      ++syncs;
    });
  if (syncs == 0) GTEST_SKIP() << "no layout pair of the matrix runs here";
}

TEST_P(TransportContractTest, VersionsSwapAtomicallyForReaders) {
  auto w = MakeWorld(SmallDense(), Layout::Of(ModelParallel{.tp = 2, .replicas = 2}),
                     Layout::Engines(2, ModelParallel{.tp = 2}));
  ASSERT_TRUE(w.ok());
  InMemoryRendezvous rdv;
  SkipUnlessRunnable(**w);
  if (IsSkipped()) return;
  Endpoints e = Make(**w, TestOptions(), rdv);
  ASSERT_FALSE(HasFailure()) << "creating the endpoints";
  auto v1 = (*w)->Weights(1), v2 = (*w)->Weights(2);
  ASSERT_EQ(RunSync(**w, 1, SenderShards(**w, v1), e.senders, e.receivers, e.shards).FirstError(), "");
  std::vector<uint8_t> want1 = (*w)->Expected(0, v1), want2 = (*w)->Expected(0, v2);
  std::atomic<bool> stop{false};
  std::atomic<int> seen1{0}, seen2{0}, mixed{0};
  std::thread reader([&] {
    while (!stop.load()) {
      VersionedShard::Snapshot s = e.shards[0]->Current();
      if (s.version == 1 && *s.bytes == want1)
        ++seen1;
      else if (s.version == 2 && *s.bytes == want2)
        ++seen2;
      else
        ++mixed;
    }
  });
  auto res = RunSync(**w, 2, SenderShards(**w, v2), e.senders, e.receivers, e.shards);
  // Keep reading a little after the swap.
  while (seen2.load() == 0 && res.FirstError().empty()) std::this_thread::yield();
  stop = true;
  reader.join();
  ASSERT_EQ(res.FirstError(), "");
  EXPECT_EQ(mixed.load(), 0);
  EXPECT_GT(seen1.load(), 0);
  EXPECT_GT(seen2.load(), 0);
  // A version that is not newer is refused before anything moves.
  auto again = e.receivers[0]->Receive(2, (*w)->recv_sched[0], *e.shards[0]);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(again.message()), HasSubstr("not newer"));
}

TEST_P(TransportContractTest, FilteredParametersKeepTheirBytes) {
  TransformerConfig c;
  c.layers = 2;
  c.hidden = 32;
  c.intermediate = 64;
  c.heads = 4;
  c.kv_heads = 4;
  c.head_dim = 8;
  c.vocab = 64;
  c.lora_rank = 4;
  Model m = MakeTransformer(c);
  Layout t = Layout::Of(ModelParallel{.tp = 2});
  Layout inf = Layout::Engines(2, ModelParallel{.tp = 2});
  auto full = MakeWorld(m, t, inf);
  auto lora = MakeWorld(m, t, inf, LoraOnly());
  ASSERT_TRUE(full.ok() && lora.ok());
  InMemoryRendezvous rdv;
  SkipUnlessRunnable(**full);
  if (IsSkipped()) return;
  Endpoints e = Make(**full, TestOptions(), rdv);
  ASSERT_FALSE(HasFailure()) << "creating the endpoints";
  auto v1 = (*full)->Weights(1), v2 = (*full)->Weights(2);
  ASSERT_EQ(RunSync(**full, 1, SenderShards(**full, v1), e.senders, e.receivers, e.shards).FirstError(), "");
  ASSERT_EQ(RunSync(**lora, 2, SenderShards(**lora, v2), e.senders, e.receivers, e.shards).FirstError(), "");
  for (int r = 0; r < 4; ++r) {
    auto snap = e.shards[r]->Current();
    EXPECT_EQ(snap.version, 2u);
    EXPECT_TRUE(*snap.bytes == (*lora)->Expected(r, v2, &v1)) << "receiver " << r;
    EXPECT_FALSE(*snap.bytes == (*full)->Expected(r, v2)) << "non-LoRA bytes must stay at v1";
  }
}

TEST_P(TransportContractTest, MissingSenderFailsItsReceiversAndTheOldVersionStays) {
  auto w =
      MakeWorld(SmallDense(), Layout::Of(ModelParallel{.tp = 2}), Layout::Engines(1, ModelParallel{.tp = 1}));
  ASSERT_TRUE(w.ok());
  InMemoryRendezvous rdv;
  TransferOptions o = TestOptions();
  o.io_timeout = absl::Milliseconds(300);
  SkipUnlessRunnable(**w);
  if (IsSkipped()) return;
  Endpoints e = Make(**w, o, rdv);
  ASSERT_FALSE(HasFailure()) << "creating the endpoints";
  auto v1 = (*w)->Weights(1), v2 = (*w)->Weights(2);
  ASSERT_EQ(RunSync(**w, 1, SenderShards(**w, v1), e.senders, e.receivers, e.shards).FirstError(), "");
  std::vector<Transport*> one_sender = {nullptr, e.senders[1]};
  auto res = RunSync(**w, 2, SenderShards(**w, v2), one_sender, e.receivers, e.shards);
  ASSERT_FALSE(res.recv[0].ok());
  EXPECT_EQ(res.recv[0].code(), absl::StatusCode::kDeadlineExceeded) << res.recv[0];
  EXPECT_THAT(std::string(res.recv[0].message()), NamesPeer("sender", 0));
  EXPECT_THAT(std::string(res.recv[0].message()), HasSubstr("version 1 stays live"));
  // The sender that did come learns the sync failed.
  EXPECT_FALSE(res.send[1].ok());
  EXPECT_THAT(std::string(res.send[1].message()), NamesPeer("receiver", 0));
  auto snap = e.shards[0]->Current();
  EXPECT_EQ(snap.version, 1u);
  EXPECT_TRUE(*snap.bytes == (*w)->Expected(0, v1));
  EXPECT_EQ(e.shards[0]->PendingVersion(), 0u);
  // The next attempt succeeds.
  AfterFailure(**w, o, rdv, e);
  ASSERT_EQ(RunSync(**w, 2, SenderShards(**w, v2), e.senders, e.receivers, e.shards).FirstError(), "");
  EXPECT_TRUE(*e.shards[0]->Current().bytes == (*w)->Expected(0, v2));
}

TEST_P(TransportContractTest, MissingReceiverFailsItsSendersNamingIt) {
  auto w =
      MakeWorld(SmallDense(), Layout::Of(ModelParallel{.tp = 1}), Layout::Engines(2, ModelParallel{.tp = 1}));
  ASSERT_TRUE(w.ok());
  InMemoryRendezvous rdv;
  TransferOptions o = TestOptions();
  o.io_timeout = absl::Milliseconds(300);
  SkipUnlessRunnable(**w);
  if (IsSkipped()) return;
  Endpoints e = Make(**w, o, rdv);
  ASSERT_FALSE(HasFailure()) << "creating the endpoints";
  std::vector<Transport*> one_receiver = {nullptr, e.receivers[1]};
  auto res = RunSync(**w, 1, SenderShards(**w, (*w)->Weights(1)), e.senders, one_receiver, e.shards);
  if (!GetParam().shared_fate) {
    EXPECT_TRUE(res.recv[1].ok()) << res.recv[1];
  } else if (!res.recv[1].ok()) {  // the sync's one communicator failed under it too: nothing applied
    EXPECT_EQ(e.shards[1]->Current().version, 0u);
    EXPECT_EQ(e.shards[1]->PendingVersion(), 0u);
  }
  ASSERT_FALSE(res.send[0].ok());
  EXPECT_EQ(res.send[0].code(), absl::StatusCode::kDeadlineExceeded) << res.send[0];
  EXPECT_THAT(std::string(res.send[0].message()), NamesPeer("receiver", 0));
}

TEST_P(TransportContractTest, SenderOfAnotherVersionIsRefused) {
  auto w =
      MakeWorld(SmallDense(), Layout::Of(ModelParallel{.tp = 1}), Layout::Engines(1, ModelParallel{.tp = 1}));
  ASSERT_TRUE(w.ok());
  InMemoryRendezvous rdv;
  TransferOptions o = TestOptions();
  o.io_timeout = absl::Milliseconds(300);
  SkipUnlessRunnable(**w);
  if (IsSkipped()) return;
  Endpoints e = Make(**w, o, rdv);
  ASSERT_FALSE(HasFailure()) << "creating the endpoints";
  auto shards = SenderShards(**w, (*w)->Weights(3));
  absl::Status recv;
  std::thread rt([&] { recv = e.receivers[0]->Receive(3, (*w)->recv_sched[0], *e.shards[0]); });
  absl::Status send = e.senders[0]->Send(2, (*w)->send_sched[0], absl::MakeConstSpan(shards[0]));
  rt.join();
  if (!GetParam().shared_fate) {  // the receiver answers the sender's connection with the refusal
    EXPECT_EQ(send.code(), absl::StatusCode::kFailedPrecondition) << send;
    EXPECT_THAT(std::string(send.message()), HasSubstr("syncing version 3, not 2"));
  } else {  // the receiver refuses the sender's header; the sender fails by its own timeout
    EXPECT_FALSE(send.ok());
    EXPECT_EQ(recv.code(), absl::StatusCode::kFailedPrecondition) << recv;
    EXPECT_THAT(std::string(recv.message()),
                AllOf(HasSubstr("sends version 2"), HasSubstr("expected version 3")));
  }
  EXPECT_FALSE(recv.ok());
  EXPECT_EQ(e.shards[0]->Current().version, 0u);
}

TEST_P(TransportContractTest, InPlaceSyncNeedsNoSecondShard) {
  auto w =
      MakeWorld(SmallDense(), Layout::Of(ModelParallel{.tp = 2}), Layout::Engines(2, ModelParallel{.tp = 2}));
  ASSERT_TRUE(w.ok());
  InMemoryRendezvous rdv;
  TransferOptions o = TestOptions();
  o.staging = Staging::kInPlace;
  o.io_timeout = absl::Milliseconds(300);
  SkipUnlessRunnable(**w);
  if (IsSkipped()) return;
  Endpoints e = Make(**w, o, rdv);
  ASSERT_FALSE(HasFailure()) << "creating the endpoints";
  auto v1 = (*w)->Weights(1), v2 = (*w)->Weights(2), v3 = (*w)->Weights(3);
  ASSERT_EQ(RunSync(**w, 1, SenderShards(**w, v1), e.senders, e.receivers, e.shards).FirstError(), "");
  const uint8_t* buffer = e.shards[0]->Current().bytes->data();
  // A reader holding a snapshot means the engine is not paused: refused before anything moves.
  {
    VersionedShard::Snapshot held = e.shards[0]->Current();
    absl::Status busy = e.receivers[0]->Receive(2, (*w)->recv_sched[0], *e.shards[0]);
    EXPECT_EQ(busy.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(busy.message()), HasSubstr("paused"));
  }
  ASSERT_EQ(RunSync(**w, 2, SenderShards(**w, v2), e.senders, e.receivers, e.shards).FirstError(), "");
  EXPECT_EQ(e.shards[0]->Current().bytes->data(), buffer) << "in place: the same buffer";
  EXPECT_TRUE(*e.shards[0]->Current().bytes == (*w)->Expected(0, v2));
  // A failure tears the shard: nothing is served, rather than a mix.
  std::vector<Transport*> one_sender = {nullptr, e.senders[1]};  // receiver 0 needs sender 0
  auto res = RunSync(**w, 3, SenderShards(**w, v3), one_sender, e.receivers, e.shards);
  ASSERT_FALSE(res.recv[0].ok());
  EXPECT_THAT(std::string(res.recv[0].message()), HasSubstr("tore the shard"));
  EXPECT_EQ(e.shards[0]->Current().bytes, nullptr);
  EXPECT_EQ(e.shards[0]->Current().version, 0u);
  // A full sync repairs it. (Receivers that had all their bytes committed 3: a version is per
  // receiver unless the caller commits an engine's ranks together with defer_commit. With a
  // shared fate they may have failed too.)
  if (!GetParam().shared_fate) {
    EXPECT_EQ(e.shards[1]->Current().version, 3u);
  }
  AfterFailure(**w, o, rdv, e);
  ASSERT_EQ(RunSync(**w, 4, SenderShards(**w, v3), e.senders, e.receivers, e.shards).FirstError(), "");
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(*e.shards[r]->Current().bytes == (*w)->Expected(r, v3)) << r;
}

// An engine's ranks must swap together: with defer_commit the caller commits every rank of
// the engine only when all of them received their bytes, and aborts them all otherwise.
TEST_P(TransportContractTest, DeferredCommitSwapsAnEnginesRanksTogether) {
  auto w =
      MakeWorld(SmallDense(), Layout::Of(ModelParallel{.tp = 2}), Layout::Engines(1, ModelParallel{.tp = 2}));
  ASSERT_TRUE(w.ok());
  InMemoryRendezvous rdv;
  TransferOptions o = TestOptions();
  o.defer_commit = true;
  o.io_timeout = absl::Milliseconds(300);
  SkipUnlessRunnable(**w);
  if (IsSkipped()) return;
  Endpoints e = Make(**w, o, rdv);
  ASSERT_FALSE(HasFailure()) << "creating the endpoints";
  auto v1 = (*w)->Weights(1), v2 = (*w)->Weights(2);
  ASSERT_EQ(RunSync(**w, 1, SenderShards(**w, v1), e.senders, e.receivers, e.shards).FirstError(), "");
  for (auto& s : e.shards) {
    EXPECT_EQ(s->Current().version, 0u);  // prepared, not yet served
    EXPECT_EQ(s->PendingVersion(), 1u);
  }
  for (auto& s : e.shards) ASSERT_TRUE(s->Commit().ok());
  EXPECT_TRUE(*e.shards[1]->Current().bytes == (*w)->Expected(1, v1));
  // Sender 0 missing: rank 0 fails, rank 1 (fed by sender 1 only) prepares v2; the engine aborts both.
  std::vector<Transport*> one_sender = {nullptr, e.senders[1]};
  auto res = RunSync(**w, 2, SenderShards(**w, v2), one_sender, e.receivers, e.shards);
  EXPECT_FALSE(res.recv[0].ok());
  if (!GetParam().shared_fate) {
    EXPECT_TRUE(res.recv[1].ok()) << res.recv[1];
  }
  for (auto& s : e.shards) s->Abort();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(e.shards[r]->Current().version, 1u);
    EXPECT_TRUE(*e.shards[r]->Current().bytes == (*w)->Expected(r, v1));
  }
}

}  // namespace skyrl::weight_sync::contract
