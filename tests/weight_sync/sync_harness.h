// Test and benchmark harness: a model with seeded random weights, both layouts, the plan, each
// rank's schedule and shard, and a threads-as-ranks runner over any transport.
#pragma once

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "weight_sync/plan/schedule.h"
#include "weight_sync/plan/transfer_planner.h"
#include "weight_sync/transport.h"

namespace skyrl::weight_sync::testing {

// Not movable: ShardMaps point at `model`.
struct World {
  Model model;
  Layout senders, receivers;
  ParamFilter filter;
  Plan plan;
  std::unique_ptr<ShardMap> smap, rmap;
  std::vector<ShardLayout> slayout, rlayout;
  std::vector<RankSchedule> send_sched, recv_sched;

  World() = default;
  World(const World&) = delete;

  // Full parameter bytes for `version` (seeded by version and parameter index).
  std::vector<std::vector<uint8_t>> Weights(uint64_t version) const {
    std::vector<std::vector<uint8_t>> w(model.params.size());
    for (size_t p = 0; p < w.size(); ++p) {
      std::mt19937_64 rng(version * 1000003 + p);
      w[p].resize(model.params[p].NumBytes());
      for (size_t i = 0; i < w[p].size(); i += 8) {
        uint64_t x = rng();
        std::memcpy(w[p].data() + i, &x, std::min<size_t>(8, w[p].size() - i));
      }
    }
    return w;
  }
  static std::vector<absl::Span<const uint8_t>> Spans(const std::vector<std::vector<uint8_t>>& w,
                                                      const ParamFilter& keep, const Model& m) {
    std::vector<absl::Span<const uint8_t>> s;
    for (size_t p = 0; p < w.size(); ++p)
      s.push_back(!keep || keep(m.params[p]) ? absl::Span<const uint8_t>(w[p]) : absl::Span<const uint8_t>());
    return s;
  }
  std::vector<uint8_t> SenderShard(int s, const std::vector<std::vector<uint8_t>>& w) const {
    std::vector<uint8_t> out(slayout[s].Bytes());
    CutShard(model, slayout[s], Spans(w, {}, model), absl::MakeSpan(out));
    return out;
  }
  // What receiver r must hold after syncing `now` over `before` (filtered params keep `before`).
  std::vector<uint8_t> Expected(int r, const std::vector<std::vector<uint8_t>>& now,
                                const std::vector<std::vector<uint8_t>>* before = nullptr) const {
    std::vector<uint8_t> out(rlayout[r].Bytes(), 0);
    if (before) CutShard(model, rlayout[r], Spans(*before, {}, model), absl::MakeSpan(out));
    CutShard(model, rlayout[r], Spans(now, filter, model), absl::MakeSpan(out));
    return out;
  }
};

// The weights after a small optimizer step: most bf16 words keep every bit, so here `w` with
// one byte in every `every` changed (a low mantissa byte). What deltas are for.
inline std::vector<std::vector<uint8_t>> SmallStep(std::vector<std::vector<uint8_t>> w, size_t every) {
  for (auto& p : w)
    for (size_t i = 0; i < p.size(); i += every) p[i] ^= 0x5A;
  return w;
}

inline absl::StatusOr<std::unique_ptr<World>> MakeWorld(Model model, Layout senders, Layout receivers,
                                                        ParamFilter filter = {}) {
  auto w = std::make_unique<World>();
  w->model = std::move(model);
  w->senders = std::move(senders);
  w->receivers = std::move(receivers);
  w->filter = filter;
  PlanOptions o;
  o.filter = filter;
  absl::StatusOr<Plan> plan = MakePlan(w->model, w->senders, w->receivers, o);
  if (!plan.ok()) return plan.status();
  w->plan = std::move(*plan);
  auto sm = ShardMap::Build(w->model, w->senders);
  auto rm = ShardMap::Build(w->model, w->receivers);
  if (!sm.ok()) return sm.status();
  if (!rm.ok()) return rm.status();
  w->smap = std::make_unique<ShardMap>(std::move(*sm));
  w->rmap = std::make_unique<ShardMap>(std::move(*rm));
  for (int s = 0; s < w->plan.num_senders; ++s) {
    w->slayout.push_back(ShardLayout::Of(w->model, *w->smap, s));
    auto sched = SendSchedule(w->plan, w->slayout.back(), s);
    if (!sched.ok()) return sched.status();
    w->send_sched.push_back(std::move(*sched));
  }
  for (int r = 0; r < w->plan.num_receivers; ++r) {
    w->rlayout.push_back(ShardLayout::Of(w->model, *w->rmap, r));
    auto sched = ReceiveSchedule(w->plan, w->rlayout.back(), r);
    if (!sched.ok()) return sched.status();
    w->recv_sched.push_back(std::move(*sched));
  }
  return w;
}

// The correctness matrix: these trainers (TP{1,2,4} x PP{1,2}, TP1 with two DP
// replicas sharing the sending; a MoE at TP2xEP2; FSDP 3x2), each to 1-3 engines of TP{1,2,4}
// (MatrixEngines): 72 layout pairs.
struct MatrixTrainer {
  std::string name;
  bool moe;  // the trainer and engines of a MoE model (experts over the engines' ranks)
  Layout layout;
};
inline std::vector<MatrixTrainer> MatrixTrainers() {
  std::vector<MatrixTrainer> out;
  for (int tp : {1, 2, 4})
    for (int pp : {1, 2})
      out.push_back({absl::StrCat("TP", tp, "xPP", pp), false,
                     Layout::Of(ModelParallel{.tp = tp, .pp = pp, .replicas = tp == 1 ? 2 : 1})});
  out.push_back({"MoE TP2xEP2", true, Layout::Of(ModelParallel{.tp = 2, .ep = 2})});
  out.push_back({"FSDP3x2", false, Layout::Of(Fsdp{.shards = 3, .replicas = 2})});
  return out;
}
// Calls fn(engines layout, description) for every engine side of the matrix for trainer `t`.
inline void ForEachMatrixEngines(const MatrixTrainer& t, const std::function<void(Layout, std::string)>& fn) {
  for (int tp : {1, 2, 4})
    for (int engines : {1, 2, 3}) {
      ModelParallel engine{.tp = tp};
      if (t.moe && tp > 1) engine.experts = ExpertSharding::kWholeOverAllRanks;
      fn(Layout::Engines(engines, engine), absl::StrCat(t.name, " -> ", engines, " x TP", tp));
    }
}

struct SyncResult {
  std::vector<absl::Status> send, recv;
  std::string FirstError() const {
    for (size_t i = 0; i < send.size(); ++i)
      if (!send[i].ok()) return absl::StrCat("sender ", i, ": ", send[i].ToString());
    for (size_t i = 0; i < recv.size(); ++i)
      if (!recv[i].ok()) return absl::StrCat("receiver ", i, ": ", recv[i].ToString());
    return "";
  }
};

// Runs one sync with every rank on its own thread. `senders_tr[s]`/`receivers_tr[r]` may be
// null to leave a rank out (a dead peer).
inline SyncResult RunSync(const World& w, uint64_t version,
                          const std::vector<std::vector<uint8_t>>& sender_shards,
                          const std::vector<Transport*>& senders_tr,
                          const std::vector<Transport*>& receivers_tr,
                          std::vector<std::unique_ptr<VersionedShard>>& shards) {
  SyncResult res;
  res.send.resize(senders_tr.size());
  res.recv.resize(receivers_tr.size());
  std::vector<std::thread> th;
  for (size_t r = 0; r < receivers_tr.size(); ++r)
    if (receivers_tr[r])
      th.emplace_back(
          [&, r] { res.recv[r] = receivers_tr[r]->Receive(version, w.recv_sched[r], *shards[r]); });
  for (size_t s = 0; s < senders_tr.size(); ++s)
    if (senders_tr[s])
      th.emplace_back([&, s] {
        res.send[s] = senders_tr[s]->Send(version, w.send_sched[s], absl::MakeConstSpan(sender_shards[s]));
      });
  for (auto& t : th) t.join();
  return res;
}

}  // namespace skyrl::weight_sync::testing
