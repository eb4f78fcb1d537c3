#include "rl/job/wire.h"

#include <gtest/gtest.h>

namespace skyrl::rl {
namespace {

TEST(Wire, PartsRoundTripIncludingEmptyAndBinary) {
  std::string binary("a\0b\xff", 4);
  const std::vector<std::string> parts = {"{\"x\":1}", "", binary, std::string(100000, 'z')};
  auto back = UnpackParts(PackParts(parts), parts.size(), "t");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, parts);
}

TEST(Wire, TruncatedOrMiscountedBytesAreDataLossNamingTheCall) {
  const std::string packed = PackParts({"hello", "world"});
  for (size_t cut : {size_t{3}, size_t{10}, packed.size() - 1}) {
    auto r = UnpackParts(packed.substr(0, cut), 2, "generate");
    ASSERT_FALSE(r.ok()) << cut;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(r.status().message().find("generate"), absl::string_view::npos) << r.status();
  }
  auto wrong = UnpackParts(packed, 3, "score");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("expected 3 parts, got 2"), absl::string_view::npos)
      << wrong.status();
}

}  // namespace
}  // namespace skyrl::rl
