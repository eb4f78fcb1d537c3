// StickyStore over a store that fails on demand: the first lost write is kept, and every
// later write is refused naming it, even once the store works again; reads go on.
#include "runtime/store/sticky_store.h"

#include <gtest/gtest.h>

#include "runtime/store/memory/memory_store.h"
#include "tests/util/flaky_store.h"

namespace skyrl::store {
namespace {

TEST(StickyStoreTest, AfterALostWriteEveryWriteIsRefusedNamingIt) {
  MemoryStore real;
  testing::FlakyStore flaky(real);
  std::vector<absl::Status> told;
  StickyStore store(flaky, [&](const absl::Status& s) { told.push_back(s); });
  ASSERT_TRUE(store.Put("actors", "a", "1").ok());
  EXPECT_TRUE(store.lost().ok());

  flaky.writes_down = true;
  absl::Status first = store.Put("actors", "b", "2");
  EXPECT_TRUE(absl::IsUnavailable(first)) << "the first lost write fails as the store said";
  flaky.writes_down = false;
  // The store works again; the head's memory and the store disagree on "b": refused.
  const int calls = flaky.calls;
  absl::Status refused = store.Put("actors", "c", "3");
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_NE(refused.message().find("put actors/b"), absl::string_view::npos) << refused;
  EXPECT_NE(refused.message().find("backend down"), absl::string_view::npos) << refused;
  EXPECT_TRUE(absl::IsFailedPrecondition(store.Delete("actors", "a").status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(store.CompareAndSet("actors", "a", "1", "9").status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(store.Apply({Write::Put("actors", "d", "4")})));
  EXPECT_EQ(flaky.calls, calls) << "refused writes never reach the store";
  EXPECT_FALSE(real.Get("actors", "c").ok());
  // Reads go on.
  EXPECT_EQ(*store.Get("actors", "a"), "1");
  EXPECT_EQ(store.Scan("actors", "")->size(), 1u);
  // Told once, of the first.
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0], store.lost());
  EXPECT_TRUE(absl::IsUnavailable(store.lost()));
}

// A refusal of bad input wrote nothing: it changes nothing.
TEST(StickyStoreTest, ARefusedInputIsNotALostWrite) {
  MemoryStore real;
  StickyStore store(real);
  EXPECT_TRUE(absl::IsInvalidArgument(store.Put("bad:table", "k", "v")));
  EXPECT_TRUE(absl::IsInvalidArgument(store.Apply({Write::Put("", "k", "v")})));
  EXPECT_TRUE(store.lost().ok());
  EXPECT_TRUE(store.Put("t", "k", "v").ok());
  // A compare-and-set that finds another value is an answer, not a failure.
  EXPECT_FALSE(*store.CompareAndSet("t", "k", "other", "w"));
  EXPECT_TRUE(store.Put("t", "k2", "v").ok());
}

TEST(StickyStoreTest, EveryCodeThatMayLoseAWriteSticks) {
  for (absl::StatusCode code : {absl::StatusCode::kDeadlineExceeded, absl::StatusCode::kResourceExhausted,
                                absl::StatusCode::kInternal, absl::StatusCode::kDataLoss}) {
    MemoryStore real;
    testing::FlakyStore flaky(real);
    flaky.code = code;
    StickyStore store(flaky);
    flaky.writes_down = true;
    EXPECT_EQ(store.Delete("t", "k").status().code(), code);
    flaky.writes_down = false;
    EXPECT_TRUE(absl::IsFailedPrecondition(store.Put("t", "k", "v"))) << absl::StatusCodeToString(code);
  }
  EXPECT_FALSE(StickyStore::MayBeLost(absl::StatusCode::kNotFound));
  EXPECT_FALSE(StickyStore::MayBeLost(absl::StatusCode::kAlreadyExists));
}

}  // namespace
}  // namespace skyrl::store
