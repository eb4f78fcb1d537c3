// MeteredStore counts each operation of the store it wraps by outcome, with its latency, and
// passes results through unchanged.
#include "runtime/store/metered_store.h"

#include <gtest/gtest.h>

#include "runtime/store/memory/memory_store.h"

namespace skyrl::store {
namespace {

// A memory store whose every call takes `cost` on the fake clock.
class SlowStore final : public Store {
 public:
  SlowStore(FakeClock& clock, absl::Duration cost) : clock_(clock), cost_(cost) {}
  absl::Status Put(absl::string_view t, absl::string_view k, absl::string_view v) override {
    clock_.Advance(cost_);
    return real_.Put(t, k, v);
  }
  absl::StatusOr<std::string> Get(absl::string_view t, absl::string_view k) override {
    clock_.Advance(cost_);
    return real_.Get(t, k);
  }
  absl::StatusOr<bool> Delete(absl::string_view t, absl::string_view k) override {
    return real_.Delete(t, k);
  }
  absl::StatusOr<std::vector<Entry>> Scan(absl::string_view t, absl::string_view p) override {
    return real_.Scan(t, p);
  }
  absl::StatusOr<bool> CompareAndSet(absl::string_view t, absl::string_view k,
                                     std::optional<absl::string_view> e,
                                     std::optional<absl::string_view> d) override {
    return real_.CompareAndSet(t, k, e, d);
  }
  absl::Status Apply(const std::vector<Write>& b) override { return real_.Apply(b); }
  std::string Describe() const override { return "slow memory"; }

 private:
  FakeClock& clock_;
  const absl::Duration cost_;
  MemoryStore real_;
};

const LatencyStats::Series* Find(const std::vector<LatencyStats::Series>& all, const std::string& op) {
  for (const LatencyStats::Series& s : all)
    if (s.name == op) return &s;
  return nullptr;
}

TEST(MeteredStoreTest, CountsEachOperationByOutcomeWithItsLatency) {
  FakeClock clock;
  MeteredStore store(std::make_unique<SlowStore>(clock, absl::Milliseconds(3)), clock);
  ASSERT_TRUE(store.Put("kv", "a", "1").ok());
  EXPECT_EQ(*store.Get("kv", "a"), "1");
  EXPECT_TRUE(absl::IsNotFound(store.Get("kv", "b").status())) << "results pass through";
  EXPECT_TRUE(absl::IsInvalidArgument(store.Put("bad table!", "a", "1")));
  EXPECT_EQ(store.Describe(), "slow memory");

  const std::vector<LatencyStats::Series> all = store.stats().Snapshot();
  const LatencyStats::Series* put = Find(all, "put");
  const LatencyStats::Series* get = Find(all, "get");
  ASSERT_NE(put, nullptr);
  ASSERT_NE(get, nullptr);
  EXPECT_EQ(put->outcomes.at("OK"), 1u);
  EXPECT_EQ(put->outcomes.at("INVALID_ARGUMENT"), 1u);
  EXPECT_EQ(get->outcomes.at("OK"), 1u);
  EXPECT_EQ(get->outcomes.at("NOT_FOUND"), 1u);
  EXPECT_DOUBLE_EQ(get->sum_s, 0.006);
  // 3 ms lies in (2.5 ms, 5 ms]: the bucket of the 5 ms bound.
  const std::vector<double>& bounds = store.stats().bounds();
  const size_t five_ms = std::find(bounds.begin(), bounds.end(), 0.005) - bounds.begin();
  ASSERT_LT(five_ms, bounds.size());
  EXPECT_EQ(get->buckets[five_ms], 2u);
  EXPECT_EQ(Find(all, "scan"), nullptr) << "only operations made appear";
}

}  // namespace
}  // namespace skyrl::store
