// One contract for every metadata-store backend: the same tests run against the in-memory
// store and against Redis through a real redis-server started on a free loopback port.
#include <gtest/gtest.h>

#include <thread>

#include "runtime/store/memory/memory_store.h"
#include "runtime/store/metered_store.h"
#include "runtime/store/sticky_store.h"
#include "runtime/store/write_behind_store.h"
#include "runtime/store/redis/redis_store.h"
#include "tests/util/redis_server.h"

namespace skyrl::store {
namespace {

using ::testing::TestWithParam;

class StoreContractTest : public TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "memory") {
      store_ = std::make_unique<MemoryStore>();
      return;
    }
    if (GetParam() == "metered") {
      store_ = std::make_unique<MeteredStore>(std::make_unique<MemoryStore>(), RealClock::Get());
      return;
    }
    if (GetParam() == "sticky") {
      inner_ = std::make_unique<MemoryStore>();
      store_ = std::make_unique<StickyStore>(*inner_);
      return;
    }
    if (GetParam() == "write_behind") {
      auto wb = WriteBehindStore::Open(std::make_unique<MemoryStore>(), {});
      ASSERT_TRUE(wb.ok()) << wb.status();
      store_ = std::move(*wb);
      return;
    }
    // No skipping: scripts/install-deps installs redis-server, and CI must exercise Redis.
    auto server = testing::RedisServer::Start("s3cret");
    ASSERT_TRUE(server.ok()) << server.status();
    redis_ = std::move(*server);
    auto store = OpenStore(redis_->url(), "contract");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  std::unique_ptr<testing::RedisServer> redis_;
  std::unique_ptr<Store> inner_;  // the store a "sticky" one wraps
  std::unique_ptr<Store> store_;
};

TEST_P(StoreContractTest, PutGetOverwriteDelete) {
  EXPECT_TRUE(absl::IsNotFound(store_->Get("nodes", "a").status()));
  ASSERT_TRUE(store_->Put("nodes", "a", "1").ok());
  EXPECT_EQ(*store_->Get("nodes", "a"), "1");
  ASSERT_TRUE(store_->Put("nodes", "a", "2").ok());
  EXPECT_EQ(*store_->Get("nodes", "a"), "2");
  EXPECT_EQ(*store_->Delete("nodes", "a"), true);
  EXPECT_EQ(*store_->Delete("nodes", "a"), false);
  EXPECT_TRUE(absl::IsNotFound(store_->Get("nodes", "a").status()));
}

TEST_P(StoreContractTest, TablesAreIndependent) {
  ASSERT_TRUE(store_->Put("t1", "k", "one").ok());
  ASSERT_TRUE(store_->Put("t2", "k", "two").ok());
  EXPECT_EQ(*store_->Get("t1", "k"), "one");
  EXPECT_EQ(*store_->Get("t2", "k"), "two");
  ASSERT_TRUE(store_->Delete("t1", "k").ok());
  EXPECT_EQ(*store_->Get("t2", "k"), "two");
}

TEST_P(StoreContractTest, BinaryKeysAndValuesRoundTrip) {
  std::string key("k\0\xff*?[x]\\", 10), value("\0\1\2\r\n\xfe", 6);
  ASSERT_TRUE(store_->Put("bin", key, value).ok());
  EXPECT_EQ(*store_->Get("bin", key), value);
  auto scan = store_->Scan("bin", std::string("k\0\xff*", 4));
  ASSERT_TRUE(scan.ok());
  ASSERT_EQ(scan->size(), 1u);
  EXPECT_EQ((*scan)[0].value, value);
}

TEST_P(StoreContractTest, ScanByPrefixIsSortedAndLiteral) {
  for (std::string k : {"actor/b", "actor/a", "actor*x", "job/1", "actor/c"})
    ASSERT_TRUE(store_->Put("mix", k, "v-" + k).ok());
  auto scan = store_->Scan("mix", "actor/");
  ASSERT_TRUE(scan.ok()) << scan.status();
  std::vector<std::string> keys;
  for (const auto& e : *scan) keys.push_back(e.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"actor/a", "actor/b", "actor/c"}));
  EXPECT_EQ((*scan)[0].value, "v-actor/a");
  // Glob characters in a prefix are literal.
  auto star = store_->Scan("mix", "actor*");
  ASSERT_TRUE(star.ok());
  ASSERT_EQ(star->size(), 1u);
  EXPECT_EQ((*star)[0].key, "actor*x");
  EXPECT_EQ(store_->Scan("mix", "")->size(), 5u);
  EXPECT_TRUE(store_->Scan("empty-table", "")->empty());
}

TEST_P(StoreContractTest, ScanReturnsEveryEntryOfALargeTable) {
  std::vector<Write> batch;
  for (int i = 0; i < 3000; ++i) batch.push_back(Write::Put("big", "k" + std::to_string(i), "v"));
  ASSERT_TRUE(store_->Apply(batch).ok());
  auto scan = store_->Scan("big", "k");
  ASSERT_TRUE(scan.ok());
  EXPECT_EQ(scan->size(), 3000u);
  EXPECT_TRUE(std::is_sorted(scan->begin(), scan->end(),
                             [](const Entry& a, const Entry& b) { return a.key < b.key; }));
}

TEST_P(StoreContractTest, CompareAndSet) {
  // Expected absent: creates.
  EXPECT_EQ(*store_->CompareAndSet("cas", "k", std::nullopt, "v1"), true);
  EXPECT_EQ(*store_->CompareAndSet("cas", "k", std::nullopt, "v2"), false);
  EXPECT_EQ(*store_->Get("cas", "k"), "v1");
  // Wrong expectation: no change.
  EXPECT_EQ(*store_->CompareAndSet("cas", "k", "nope", "v3"), false);
  EXPECT_EQ(*store_->Get("cas", "k"), "v1");
  EXPECT_EQ(*store_->CompareAndSet("cas", "k", "v1", "v2"), true);
  EXPECT_EQ(*store_->Get("cas", "k"), "v2");
  // Desired absent: deletes.
  EXPECT_EQ(*store_->CompareAndSet("cas", "k", "v2", std::nullopt), true);
  EXPECT_TRUE(absl::IsNotFound(store_->Get("cas", "k").status()));
  // An empty value is a value, not absence.
  EXPECT_EQ(*store_->CompareAndSet("cas", "e", std::nullopt, ""), true);
  EXPECT_EQ(*store_->CompareAndSet("cas", "e", std::nullopt, "x"), false);
  EXPECT_EQ(*store_->CompareAndSet("cas", "e", "", "x"), true);
}

TEST_P(StoreContractTest, ConcurrentCompareAndSetIncrementsLoseNothing) {
  ASSERT_TRUE(store_->Put("ctr", "n", "0").ok());
  constexpr int kThreads = 4, kIncrements = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements;) {
        std::string cur = *store_->Get("ctr", "n");
        std::string next = std::to_string(std::stoi(cur) + 1);
        if (*store_->CompareAndSet("ctr", "n", cur, next)) ++i;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(*store_->Get("ctr", "n"), std::to_string(kThreads * kIncrements));
}

TEST_P(StoreContractTest, BatchAppliesPutsAndDeletes) {
  ASSERT_TRUE(store_->Put("b", "gone", "x").ok());
  ASSERT_TRUE(store_
                  ->Apply({Write::Put("b", "k1", "1"), Write::Put("b2", "k2", "2"),
                           Write::Delete("b", "gone"), Write::Put("b", "k1", "1b")})
                  .ok());
  EXPECT_EQ(*store_->Get("b", "k1"), "1b");
  EXPECT_EQ(*store_->Get("b2", "k2"), "2");
  EXPECT_TRUE(absl::IsNotFound(store_->Get("b", "gone").status()));
  EXPECT_TRUE(store_->Apply({}).ok());
}

TEST_P(StoreContractTest, InvalidInputIsRejectedAndNothingIsWritten) {
  ASSERT_TRUE(store_->Put("v", "keep", "old").ok());
  absl::Status bad_table = store_->Put("bad:table", "k", "v");
  EXPECT_TRUE(absl::IsInvalidArgument(bad_table));
  EXPECT_NE(bad_table.message().find("bad:table"), std::string::npos) << bad_table;
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Put("v", "", "v")));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Get("v", std::string(kMaxKeyBytes + 1, 'k')).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Put("v", "k", std::string(kMaxValueBytes + 1, 'x'))));
  // A batch with one bad write writes nothing at all.
  absl::Status s = store_->Apply({Write::Put("v", "keep", "new"), Write::Put("", "k", "v")});
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_EQ(*store_->Get("v", "keep"), "old");
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Scan("", "").status()));
}

TEST_P(StoreContractTest, LargeValueRoundTrips) {
  std::string big(8 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = char(i * 131);
  ASSERT_TRUE(store_->Put("large", "blob", big).ok());
  EXPECT_EQ(*store_->Get("large", "blob"), big);
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreContractTest,
                         ::testing::Values("memory", "redis", "write_behind", "metered", "sticky"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace skyrl::store
