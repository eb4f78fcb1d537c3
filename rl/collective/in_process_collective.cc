#include "rl/collective/in_process_collective.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace skyrl::rl {
namespace {

class SingleRank final : public Collective {
 public:
  int Rank() const override { return 0; }
  int WorldSize() const override { return 1; }
  absl::Status AllReduceSum(float*, int64_t count) override {
    if (count < 0) return absl::InvalidArgumentError("AllReduceSum: count < 0");
    return absl::OkStatus();
  }
  absl::Status Broadcast(float*, int64_t count, int root) override {
    if (count < 0) return absl::InvalidArgumentError("Broadcast: count < 0");
    if (root != 0)
      return absl::InvalidArgumentError(absl::StrCat("Broadcast: root ", root, " outside world 1"));
    return absl::OkStatus();
  }
};

// The shared half of a group.
struct Group {
  explicit Group(int n, absl::Duration t)
      : world(n), timeout(t), slots(n, nullptr), counts(n, 0), ops(n, 0) {}
  const int world;
  const absl::Duration timeout;
  absl::Mutex mu;
  int arrived ABSL_GUARDED_BY(mu) = 0;
  int64_t generation ABSL_GUARDED_BY(mu) = 0;
  bool broken ABSL_GUARDED_BY(mu) = false;
  std::string broken_why ABSL_GUARDED_BY(mu);
  // Posted between the first and second barrier of an operation; read-only in between.
  std::vector<float*> slots;
  std::vector<int64_t> counts;
  std::vector<int> ops;  // 1 all-reduce, 2 + root broadcast

  // Generation barrier. On timeout the group is broken for good.
  absl::Status Barrier(int rank, const char* what) {
    absl::MutexLock l(&mu);
    if (broken) return absl::AbortedError(absl::StrCat(what, ": group broken earlier: ", broken_why));
    const int64_t gen = generation;
    if (++arrived == world) {
      arrived = 0;
      ++generation;
      return absl::OkStatus();
    }
    auto done = [this, gen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return generation != gen || broken; };
    if (!mu.AwaitWithTimeout(absl::Condition(&done), timeout)) {
      broken = true;
      broken_why = absl::StrCat("rank ", rank, " waited ", absl::FormatDuration(timeout), " in ", what,
                                " for the other ranks");
      return absl::DeadlineExceededError(broken_why);
    }
    if (generation == gen) return absl::AbortedError(absl::StrCat(what, ": group broken: ", broken_why));
    return absl::OkStatus();
  }

  // After the first barrier: every rank checks the same posted facts, so all agree.
  absl::Status CheckAgreement(const char* what) {
    for (int r = 1; r < world; ++r) {
      if (counts[r] != counts[0] || ops[r] != ops[0]) {
        return absl::FailedPreconditionError(absl::StrCat(what, ": ranks disagree: rank 0 called op ", ops[0],
                                                          " with ", counts[0], " elements, rank ", r, " op ",
                                                          ops[r], " with ", counts[r]));
      }
    }
    return absl::OkStatus();
  }
};

class Member final : public Collective {
 public:
  Member(std::shared_ptr<Group> g, int rank) : g_(std::move(g)), rank_(rank) {}
  int Rank() const override { return rank_; }
  int WorldSize() const override { return g_->world; }

  absl::Status AllReduceSum(float* data, int64_t count) override {
    if (count < 0) return absl::InvalidArgumentError("AllReduceSum: count < 0");
    g_->slots[rank_] = data;
    g_->counts[rank_] = count;
    g_->ops[rank_] = 1;
    if (auto s = g_->Barrier(rank_, "AllReduceSum"); !s.ok()) return s;
    absl::Status agree = g_->CheckAgreement("AllReduceSum");
    if (agree.ok()) {
      scratch_.assign(g_->slots[0], g_->slots[0] + count);
      for (int r = 1; r < g_->world; ++r) {
        const float* src = g_->slots[r];
        for (int64_t i = 0; i < count; ++i) scratch_[i] += src[i];
      }
    }
    // Nobody may overwrite its buffer until every rank has read all of them.
    if (auto s = g_->Barrier(rank_, "AllReduceSum"); !s.ok()) return s;
    if (!agree.ok()) return agree;
    if (count > 0) std::memcpy(data, scratch_.data(), count * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status Broadcast(float* data, int64_t count, int root) override {
    if (count < 0) return absl::InvalidArgumentError("Broadcast: count < 0");
    if (root < 0 || root >= g_->world) {
      return absl::InvalidArgumentError(absl::StrCat("Broadcast: root ", root, " outside world ", g_->world));
    }
    g_->slots[rank_] = data;
    g_->counts[rank_] = count;
    g_->ops[rank_] = 2 + root;
    if (auto s = g_->Barrier(rank_, "Broadcast"); !s.ok()) return s;
    absl::Status agree = g_->CheckAgreement("Broadcast");
    if (agree.ok() && rank_ != root && count > 0) std::memcpy(data, g_->slots[root], count * sizeof(float));
    if (auto s = g_->Barrier(rank_, "Broadcast"); !s.ok()) return s;
    return agree;
  }

 private:
  std::shared_ptr<Group> g_;
  const int rank_;
  std::vector<float> scratch_;
};

}  // namespace

std::unique_ptr<Collective> MakeSingleRankCollective() { return std::make_unique<SingleRank>(); }

std::vector<std::unique_ptr<Collective>> MakeInProcessGroup(int world, absl::Duration timeout) {
  auto g = std::make_shared<Group>(world, timeout);
  std::vector<std::unique_ptr<Collective>> out;
  for (int r = 0; r < world; ++r) out.push_back(std::make_unique<Member>(g, r));
  return out;
}

}  // namespace skyrl::rl
