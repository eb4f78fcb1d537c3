// MetricsServer: a real HTTP endpoint on loopback, scraped with a plain GET.
#include "runtime/metrics/metrics_server.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/metric_family.h"
#include "tests/runtime/metrics/http_get.h"

namespace skyrl::metrics {
namespace {

using ::testing::HasSubstr;

class Answer : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::ClientMetric m;
    m.label = {{"kind", "test"}};
    m.gauge.value = ++calls_;
    return {{"skyrl_test_scrapes", "Scrapes so far", prometheus::MetricType::Gauge, {m}}};
  }

 private:
  mutable int calls_ = 0;
};

TEST(MetricsServerTest, ServesWhatItsCollectablesSayAtEachScrape) {
  absl::StatusOr<std::unique_ptr<MetricsServer>> s = MetricsServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_GT((*s)->port(), 0);
  auto answer = std::make_shared<Answer>();
  (*s)->Add(answer);
  const std::string first = skyrl::testing::HttpGet((*s)->port(), "/metrics");
  EXPECT_THAT(first, HasSubstr("200 OK"));
  EXPECT_THAT(first, HasSubstr("# TYPE skyrl_test_scrapes gauge"));
  EXPECT_THAT(first, HasSubstr("skyrl_test_scrapes{kind=\"test\"} 1"));
  EXPECT_THAT(skyrl::testing::HttpGet((*s)->port(), "/metrics"),
              HasSubstr("skyrl_test_scrapes{kind=\"test\"} 2"));
}

TEST(MetricsServerTest, APortInUseOrOutOfRangeIsRefusedNamingIt) {
  absl::StatusOr<std::unique_ptr<MetricsServer>> first = MetricsServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<MetricsServer>> again = MetricsServer::Start("127.0.0.1", (*first)->port());
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(again.status().message()),
              HasSubstr("127.0.0.1:" + std::to_string((*first)->port())));
  EXPECT_EQ(MetricsServer::Start("127.0.0.1", 70000).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace skyrl::metrics
