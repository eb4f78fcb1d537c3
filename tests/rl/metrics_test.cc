#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>
#include <sstream>

#include "rl/train/metrics.h"

namespace skyrl::rl {
namespace {

std::vector<StepMetrics> History() {
  std::vector<StepMetrics> h;
  for (int i = 1; i <= 3; ++i) {
    StepMetrics m;
    m.step = i;
    m.mean_reward = 0.1 * i;
    m.kl = 0.01 * i;
    m.response_tokens = 100 + i;
    m.generate_s = 0.5;
    h.push_back(m);
  }
  return h;
}

TEST(Metrics, JsonlHasOneParsableObjectPerStep) {
  std::istringstream in(MetricsJsonl(History()));
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    ++n;
    EXPECT_EQ(j["step"], n);
    EXPECT_DOUBLE_EQ(j["mean_reward"].get<double>(), 0.1 * n);
    EXPECT_EQ(j["response_tokens"], 100 + n);
    EXPECT_TRUE(j.contains("sync_s"));
  }
  EXPECT_EQ(n, 3);
}

TEST(Metrics, SvgHasACurvePointPerStepAndEscapesTheTitle) {
  std::string svg = RewardCurveSvg(History(), 0.9, "a<b");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("a&lt;b"), std::string::npos);
  EXPECT_NE(svg.find("target 0.90"), std::string::npos);
  auto poly = svg.find("<polyline");
  ASSERT_NE(poly, std::string::npos);
  auto pts = svg.substr(poly, svg.find("/>", poly) - poly);
  EXPECT_EQ(std::count(pts.begin(), pts.end(), ','), 3);
  EXPECT_NE(FormatStep(History()[1]).find("reward 0.200"), std::string::npos);
}

}  // namespace
}  // namespace skyrl::rl
