// Operation counts and latency buckets for daemons' metrics.
#include "runtime/common/latency_stats.h"

#include <gtest/gtest.h>

namespace skyrl {
namespace {

TEST(LatencyStatsTest, EachRecordLandsInTheFirstBucketThatHoldsIt) {
  LatencyStats stats({0.001, 0.01, 0.1});
  stats.Record("get", "OK", 0.0005);
  stats.Record("get", "OK", 0.001);  // on a bound: that bucket (le is inclusive)
  stats.Record("get", "NOT_FOUND", 0.05);
  stats.Record("get", "OK", 3);   // above the last bound
  stats.Record("get", "OK", -1);  // a clock step backwards counts as zero
  const std::vector<LatencyStats::Series> s = stats.Snapshot();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].name, "get");
  EXPECT_EQ(s[0].buckets, (std::vector<uint64_t>{3, 0, 1, 1}));
  EXPECT_EQ(s[0].outcomes.at("OK"), 4u);
  EXPECT_EQ(s[0].outcomes.at("NOT_FOUND"), 1u);
  EXPECT_DOUBLE_EQ(s[0].sum_s, 0.0005 + 0.001 + 0.05 + 3);
}

TEST(LatencyStatsTest, NamesPastTheCapShareOneOtherSeries) {
  LatencyStats stats({1}, /*max_names=*/3);
  for (const char* name : {"a", "b", "c", "d", "a"}) stats.Record(name, "OK", 0.1);
  const std::vector<LatencyStats::Series> s = stats.Snapshot();
  ASSERT_EQ(s.size(), 3u);  // sorted by name; "(" sorts before letters
  EXPECT_EQ(s[0].name, "(other)");
  EXPECT_EQ(s[0].outcomes.at("OK"), 2u) << "c and d";
  EXPECT_EQ(s[1].name, "a");
  EXPECT_EQ(s[1].outcomes.at("OK"), 2u);
  EXPECT_EQ(s[2].name, "b");
}

}  // namespace
}  // namespace skyrl
