// WriteBehindStore over a backend that fails on demand: writes keep succeeding and reads keep
// answering while the backend is down; when it is back, the queued writes reach it in order,
// and a later store opened on the backend sees exactly what the head acknowledged.
#include "runtime/store/write_behind_store.h"

#include <gtest/gtest.h>

#include <atomic>

#include "runtime/store/memory/memory_store.h"
#include "tests/util/flaky_store.h"

namespace skyrl::store {
namespace {

using testing::FlakyStore;

WriteBehindOptions Fast(std::vector<std::string> tables = {"t"}) {
  WriteBehindOptions o;
  o.tables = std::move(tables);
  o.retry_every = absl::Milliseconds(10);
  return o;
}

bool WaitUntil(const std::function<bool()>& pred) {
  for (int i = 0; i < 500; ++i) {
    if (pred()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

TEST(WriteBehindStoreTest, LoadsTheBackendsTablesWhenOpened) {
  MemoryStore real;
  ASSERT_TRUE(real.Put("t", "a", "1").ok());
  ASSERT_TRUE(real.Put("other", "b", "2").ok());
  auto flaky = std::make_unique<FlakyStore>(real);
  auto wb = WriteBehindStore::Open(std::move(flaky), Fast({"t"}));
  ASSERT_TRUE(wb.ok());
  EXPECT_EQ(*(*wb)->Get("t", "a"), "1");
  EXPECT_TRUE(absl::IsNotFound((*wb)->Get("other", "b").status())) << "only the listed tables are loaded";
}

TEST(WriteBehindStoreTest, KeepsServingWhileTheBackendIsDownAndCatchesUpInOrder) {
  MemoryStore real;
  auto flaky_owned = std::make_unique<FlakyStore>(real);
  FlakyStore* flaky = flaky_owned.get();
  auto opened = WriteBehindStore::Open(std::move(flaky_owned), Fast());
  ASSERT_TRUE(opened.ok());
  WriteBehindStore& wb = **opened;
  ASSERT_TRUE(wb.Put("t", "k", "before").ok());
  EXPECT_EQ(*real.Get("t", "k"), "before") << "with the backend up, a write reaches it before it returns";

  flaky->down = true;
  ASSERT_TRUE(wb.Put("t", "k", "v1").ok());
  ASSERT_TRUE(wb.Put("t", "k", "v2").ok());
  ASSERT_TRUE(wb.Put("t", "gone", "x").ok());
  ASSERT_TRUE(*wb.Delete("t", "gone"));
  EXPECT_TRUE(*wb.CompareAndSet("t", "cas", std::nullopt, "set"));
  EXPECT_FALSE(*wb.CompareAndSet("t", "cas", std::nullopt, "again")) << "answered from memory";
  ASSERT_TRUE(wb.Apply({Write::Put("t", "b1", "1"), Write::Put("t", "b2", "2")}).ok());
  EXPECT_EQ(*wb.Get("t", "k"), "v2");
  EXPECT_EQ(wb.Scan("t", "b")->size(), 2u);
  EXPECT_EQ(wb.pending(), 7u);
  EXPECT_NE(wb.Describe().find("7 writes kept in memory"), std::string::npos) << wb.Describe();
  EXPECT_EQ(*real.Get("t", "k"), "before") << "nothing reached the backend";

  flaky->down = false;
  ASSERT_TRUE(WaitUntil([&] { return wb.pending() == 0; })) << wb.pending() << " writes still queued";
  EXPECT_EQ(*real.Get("t", "k"), "v2") << "replayed in order: the last write wins";
  EXPECT_TRUE(absl::IsNotFound(real.Get("t", "gone").status()));
  EXPECT_EQ(*real.Get("t", "cas"), "set");
  EXPECT_EQ(*real.Get("t", "b2"), "2");
  // Writes go straight through again.
  ASSERT_TRUE(wb.Put("t", "after", "1").ok());
  EXPECT_EQ(*real.Get("t", "after"), "1");
}

TEST(WriteBehindStoreTest, ABoundedQueueRefusesWritesAndChangesNothing) {
  MemoryStore real;
  auto flaky_owned = std::make_unique<FlakyStore>(real);
  FlakyStore* flaky = flaky_owned.get();
  WriteBehindOptions o = Fast();
  o.max_pending_bytes = 200;
  o.retry_every = absl::Seconds(60);  // no replay during the test
  auto opened = WriteBehindStore::Open(std::move(flaky_owned), o);
  ASSERT_TRUE(opened.ok());
  WriteBehindStore& wb = **opened;
  flaky->down = true;
  ASSERT_TRUE(wb.Put("t", "a", std::string(100, 'x')).ok());
  absl::Status s = wb.Put("t", "b", std::string(100, 'y'));
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find("refusing more"), std::string::npos) << s;
  EXPECT_TRUE(absl::IsNotFound(wb.Get("t", "b").status())) << "a refused write changes nothing";
  EXPECT_TRUE(absl::IsInvalidArgument(wb.Put("", "k", "v"))) << "validation still comes first";
}

}  // namespace
}  // namespace skyrl::store
