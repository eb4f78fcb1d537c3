#include "runtime/common/resources.h"

#include <gtest/gtest.h>

#include <cmath>

namespace skyrl {
namespace {

TEST(ResourceSetTest, ParsesAndPrintsTheCanonicalForm) {
  auto r = ResourceSet::Parse("custom=2, memory=64Gi,GPU=8,CPU=8");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ToString(), "CPU=8,GPU=8,memory=64Gi,custom=2");
  EXPECT_EQ(r->Get(kMemory), 64.0 * (1ull << 30));
  EXPECT_EQ(r->Get("custom"), 2);
  auto again = ResourceSet::Parse(r->ToString());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *r);
}

TEST(ResourceSetTest, MemoryUnits) {
  EXPECT_EQ(ResourceSet::Parse("memory=1K")->Get(kMemory), 1000);
  EXPECT_EQ(ResourceSet::Parse("memory=1Ki")->Get(kMemory), 1024);
  EXPECT_EQ(ResourceSet::Parse("memory=1.5Gi")->ToString(), "memory=1536Mi");
  EXPECT_EQ(ResourceSet::Parse("memory=1000")->ToString(), "memory=1000");
  EXPECT_EQ(ResourceSet::Parse("memory=2T")->Get(kMemory), 2e12);
}

TEST(ResourceSetTest, FractionsAreExact) {
  ResourceSet a = *ResourceSet::Parse("GPU=0.1");
  ResourceSet sum;
  for (int i = 0; i < 10; ++i) sum += a;
  EXPECT_EQ(sum.GetUnits(kGPU), ResourceSet::kUnitsPerWhole);
  EXPECT_EQ(sum.ToString(), "GPU=1");
  EXPECT_EQ(ResourceSet::Parse("GPU=0.25")->ToString(), "GPU=0.25");
}

TEST(ResourceSetTest, ContainsAndSubtract) {
  ResourceSet node = *ResourceSet::Parse("CPU=8,GPU=4");
  ResourceSet req = *ResourceSet::Parse("CPU=2,GPU=0.5");
  EXPECT_TRUE(node.Contains(req));
  EXPECT_FALSE(req.Contains(node));
  EXPECT_FALSE(node.Contains(*ResourceSet::Parse("custom=1")));
  node -= req;
  EXPECT_EQ(node.ToString(), "CPU=6,GPU=3.5");
}

TEST(ResourceSetTest, RejectsBadInputNamingTheField) {
  struct Case {
    const char* text;
    const char* needle;
  } cases[] = {
      {"CPU=-1", "CPU"},
      {"GPU=nan", "GPU"},
      {"GPU=inf", "GPU"},
      {"memory=4Gb", "unit"},
      {"memory=x", "memory"},
      {"CPU", "NAME=VALUE"},
      {"=3", "NAME=VALUE"},
      {"CPU=1,CPU=2", "twice"},
      {"cpu=4", "did you mean"},
      {"CPU=abc", "CPU"},
      {"9lives=1", "start with"},
      {"a b=1", "outside"},
      {"GPU=0.00001", "granularity"},
      {"CPU=1e300", "too large"},
  };
  for (const auto& c : cases) {
    auto r = ResourceSet::Parse(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << c.text;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos) << c.text << " -> " << r.status();
  }
  EXPECT_TRUE(ResourceSet::Parse("").ok());
  EXPECT_FALSE(ResourceSet::FromMap({{"GPU", std::nan("")}}).ok());
}

TEST(ResourceSetTest, GpuRequestsAboveOneMustBeWhole) {
  EXPECT_TRUE(ValidateResourceRequest(*ResourceSet::Parse("GPU=0.5")).ok());
  EXPECT_TRUE(ValidateResourceRequest(*ResourceSet::Parse("GPU=1")).ok());
  EXPECT_TRUE(ValidateResourceRequest(*ResourceSet::Parse("GPU=8")).ok());
  absl::Status s = ValidateResourceRequest(*ResourceSet::Parse("GPU=1.5"));
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("whole"), std::string::npos);
}

}  // namespace
}  // namespace skyrl
