#include "runtime/worker/node_resources.h"

#include <gtest/gtest.h>

namespace skyrl::worker {
namespace {

TEST(BuildOfferTest, DetectsCpuAndMemoryAndAppliesOverrides) {
  auto detected = BuildOffer("");
  ASSERT_TRUE(detected.ok()) << detected.status();
  EXPECT_GE(detected->resources.Get(kCPU), 1);
  EXPECT_GT(detected->resources.Get(kMemory), 0);
  EXPECT_EQ(detected->resources.Get(kGPU), double(detected->gpu_ids.size()));

  auto over = BuildOffer("CPU=3,memory=2Gi,custom=4,GPU=0");
  ASSERT_TRUE(over.ok()) << over.status();
  EXPECT_EQ(over->resources.ToString(), "CPU=3,GPU=0,memory=2Gi,custom=4");
  EXPECT_TRUE(over->gpu_ids.empty());
}

TEST(BuildOfferTest, CannotClaimMoreGpusThanDetected) {
  size_t have = DetectGpus().ids.size();
  auto r = BuildOffer("GPU=" + std::to_string(have + 1));
  EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
  EXPECT_NE(r.status().message().find("--resources"), std::string::npos);
  EXPECT_FALSE(BuildOffer("GPU=0.5").ok());
  EXPECT_FALSE(BuildOffer("CPU=-2").ok());
}

TEST(DetectGpusTest, SaysWhyThereAreNone) {
  GpuDetection d = DetectGpus();
  if (d.ids.empty()) {
    EXPECT_NE(d.note.find("no CUDA device"), std::string::npos) << d.note;
  } else {
    for (size_t i = 0; i < d.ids.size(); ++i) EXPECT_EQ(d.ids[i], int(i));
  }
}

TEST(ParseLabelsTest, ParsesAndValidates) {
  auto l = ParseLabels("accelerator=H100,nvlink-domain=rack3");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->at("nvlink-domain"), "rack3");
  EXPECT_TRUE(ParseLabels("")->empty());
  EXPECT_NE(ParseLabels("novalue").status().message().find("--labels"), std::string::npos);
  EXPECT_FALSE(ParseLabels("a=1,a=2").ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ParseLabels("skyrl.node-id=n").status())) << "the head's key";
  EXPECT_FALSE(ParseLabels("bad key=1").ok());
}

}  // namespace
}  // namespace skyrl::worker
