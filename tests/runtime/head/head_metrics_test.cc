// The head's metrics (head_metrics.h): read from its tables, and served by a started head.
#include "runtime/head/head_metrics.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/store/memory/memory_store.h"
#include "tests/runtime/head/fake_workers.h"
#include "tests/runtime/head/head_fixture.h"
#include "tests/runtime/metrics/flatten.h"
#include "tests/runtime/metrics/http_get.h"

namespace skyrl::head {
namespace {

using ::testing::HasSubstr;

// name{label=value,...} -> value, over every family.
using ::skyrl::testing::Flatten;

v1::NodeInfo Node(int i, int gpus) {
  v1::NodeInfo n;
  n.set_address("127.0.0.1:" + std::to_string(9000 + i));
  (*n.mutable_resources_total())["CPU"] = 8;
  (*n.mutable_resources_total())["GPU"] = gpus;
  for (int g = 0; g < gpus; ++g) n.add_gpu_ids(g);
  return n;
}

TEST(HeadMetricsTest, CountsNodesResourcesGroupsAndJobsFromTheTables) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  ASSERT_NE(head, nullptr);
  absl::StatusOr<NodeId> a = head->nodes().Register(Node(1, 4));
  absl::StatusOr<NodeId> b = head->nodes().Register(Node(2, 0));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(head->nodes().Unregister(*b, "test kill").ok());
  v1::PlacementGroupSpec spec;
  (*spec.add_bundles()->mutable_resources())["GPU"] = 2;
  ASSERT_TRUE(head->groups().Create(spec).ok());

  std::map<std::string, double> m = Flatten(HeadMetrics(*head).Collect());
  EXPECT_EQ(m["skyrl_nodes{state=alive}"], 1);
  EXPECT_EQ(m["skyrl_nodes{state=dead}"], 1);
  const std::string node = a->ToString();
  EXPECT_EQ(m["skyrl_node_resources{kind=total,node=" + node + ",resource=GPU}"], 4);
  EXPECT_EQ(m["skyrl_node_resources{kind=used,node=" + node + ",resource=GPU}"], 2);  // the bundle
  EXPECT_EQ(m["skyrl_node_resources{kind=used,node=" + node + ",resource=CPU}"], 0);
  EXPECT_EQ(m.count("skyrl_node_resources{kind=total,node=" + b->ToString() + ",resource=CPU}"), 0u)
      << "a dead node's resources are not reported";
  EXPECT_EQ(m["skyrl_placement_groups{state=created}"], 1);
  EXPECT_EQ(m.count("skyrl_placement_groups{state=pending}"), 1u) << "every state is a series, 0 here";
  EXPECT_EQ(m["skyrl_placement_groups{state=pending}"], 0);
  EXPECT_EQ(m["skyrl_jobs{state=running}"], 0);
  EXPECT_EQ(m["skyrl_actors{state=alive}"], 0);
}

TEST(HeadMetricsTest, AStartedHeadServesThemOverHttpOnlyWhenAsked) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  HeadOptions options = TestHeadOptions("head-metrics-jobs");
  {
    absl::StatusOr<std::unique_ptr<Head>> off = Head::Open(options, store, workers, clock);
    ASSERT_TRUE(off.ok()) << off.status();
    ASSERT_TRUE((*off)->Start().ok());
    EXPECT_EQ((*off)->metrics_port(), -1);
    (*off)->Shutdown();
  }
  options.metrics_port = 0;
  absl::StatusOr<std::unique_ptr<Head>> head = Head::Open(options, store, workers, clock);
  ASSERT_TRUE(head.ok()) << head.status();
  ASSERT_TRUE((*head)->Start().ok());
  ASSERT_GT((*head)->metrics_port(), 0);
  ASSERT_TRUE((*head)->nodes().Register(Node(1, 8)).ok());
  const int port = (*head)->metrics_port();
  const std::string body = skyrl::testing::HttpGet(port, "/metrics");
  EXPECT_THAT(body, HasSubstr("200 OK"));
  EXPECT_THAT(body, HasSubstr("# TYPE skyrl_nodes gauge"));
  EXPECT_THAT(body, HasSubstr("skyrl_nodes{state=\"alive\"} 1"));
  EXPECT_THAT(body, HasSubstr("resource=\"GPU\"} 8"));
  (*head)->Shutdown();
  EXPECT_EQ(skyrl::testing::HttpGet(port, "/metrics"), "") << "closed at shutdown";
  EXPECT_EQ((*head)->metrics_port(), -1);
}

}  // namespace
}  // namespace skyrl::head
