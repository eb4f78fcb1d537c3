// telemetry_view.h: scrape targets from the node table, and a job's timeline as a Chrome trace.
#include "runtime/views/telemetry_view.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace skyrl::views {
namespace {

TEST(TelemetryViewTest, HostOfDropsThePort) {
  EXPECT_EQ(HostOf("10.0.0.5:7000"), "10.0.0.5");
  EXPECT_EQ(HostOf("head.local:80"), "head.local");
  EXPECT_EQ(HostOf("[fd00::1]:7000"), "[fd00::1]");
  EXPECT_EQ(HostOf("fd00::1"), "fd00::1");
  EXPECT_EQ(HostOf("worker-3"), "worker-3");
}

TEST(TelemetryViewTest, TargetsAreTheHeadAndEveryAliveWorkerThatServesMetrics) {
  v1::ListNodesReply nodes;
  nodes.set_head_metrics_port(9100);
  auto add = [&](const char* id, const char* addr, int port, v1::NodeState state) {
    v1::NodeInfo* n = nodes.add_nodes();
    n->set_node_id(id);
    n->set_address(addr);
    n->set_hostname(std::string("host-") + id);
    n->set_metrics_port(port);
    n->set_state(state);
  };
  add("node-a", "10.0.0.2:7001", 9200, v1::NODE_ALIVE);
  add("node-b", "10.0.0.3:7001", 0, v1::NODE_ALIVE);    // no --metrics-port
  add("node-c", "10.0.0.4:7001", 9200, v1::NODE_DEAD);  // gone
  std::vector<MetricsTarget> t = MetricsTargets("10.0.0.1", nodes);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].role, "head");
  EXPECT_EQ(t[0].address, "10.0.0.1:9100");
  EXPECT_EQ(t[1].address, "10.0.0.2:9200");

  nlohmann::json sd = nlohmann::json::parse(RenderTargetsJson(t));
  ASSERT_TRUE(sd.is_array());
  ASSERT_EQ(sd.size(), 2u);
  EXPECT_EQ(sd[1]["targets"], nlohmann::json::array({"10.0.0.2:9200"}));
  EXPECT_EQ(sd[1]["labels"]["skyrl_role"], "worker");
  EXPECT_EQ(sd[1]["labels"]["skyrl_node_id"], "node-a");
  EXPECT_EQ(sd[1]["labels"]["skyrl_hostname"], "host-node-a");
  EXPECT_NE(RenderTargetsTable(t).find("http://10.0.0.2:9200/metrics"), std::string::npos);

  nodes.set_head_metrics_port(0);
  nodes.mutable_nodes(0)->set_metrics_port(0);
  EXPECT_TRUE(MetricsTargets("10.0.0.1", nodes).empty());
  EXPECT_NE(RenderTargetsTable({}).find("--metrics-port"), std::string::npos) << "says how to get some";
}

v1::CallRecord Call(const std::string& method, int64_t arrived, int64_t start, int64_t end, int code = 0) {
  v1::CallRecord c;
  c.set_method(method);
  c.set_arrived_unix_us(arrived);
  c.set_start_unix_us(start);
  c.set_end_unix_us(end);
  c.set_code(code);
  return c;
}

TEST(TelemetryViewTest, TimelineHasAStepTrackAndOneTrackPerActorWithASlicePerCall) {
  const int64_t t0 = 1'800'000'000'000'000;
  std::vector<std::string> steps = {
      nlohmann::json({{"step", 1},
                      {"step_s", 0.5},
                      {"start_unix_us", t0},
                      {"phases",
                       {{{"phase", "generate"}, {"start_unix_us", t0}, {"end_unix_us", t0 + 200000}},
                        {{"phase", "wait"}, {"start_unix_us", t0 + 200000}, {"end_unix_us", t0 + 200000}},
                        {{"phase", "train"}, {"start_unix_us", t0 + 200000}, {"end_unix_us", t0 + 500000}}}}})
          .dump(),
      "not json at all",                     // a job's own bytes: skipped
      nlohmann::json({{"step", 2}}).dump(),  // no timestamps (an older job): skipped
  };
  std::vector<ActorCalls> actors(3);
  actors[0].actor.set_actor_id("actor-gen");
  actors[0].actor.set_node_id("node-a");
  actors[0].actor.mutable_spec()->set_class_name("grpo_generator");
  *actors[0].telemetry.add_records() = Call("generate", t0 + 1000, t0 + 2000, t0 + 190000);
  actors[1].actor.set_actor_id("actor-train");
  actors[1].actor.set_node_id("node-b");
  actors[1].actor.mutable_spec()->set_name("trainer-0");
  *actors[1].telemetry.add_records() = Call("train", t0 + 210000, t0 + 210000, t0 + 490000);
  *actors[1].telemetry.add_records() = Call("train", t0 + 495000, 0, t0 + 496000, 4);
  actors[1].telemetry.set_records_dropped(7);
  actors[2].actor.set_actor_id("actor-lost");
  actors[2].actor.set_node_id("node-a");
  actors[2].error = "its node is gone";

  nlohmann::json trace = nlohmann::json::parse(RenderTimeline("job-1", steps, actors));
  EXPECT_EQ(trace["otherData"]["job_id"], "job-1");
  EXPECT_EQ(trace["otherData"]["origin_unix_us"], t0);
  std::map<std::pair<int, int>, std::string> tracks;  // (pid, tid) -> name
  std::map<int, std::string> processes;
  std::vector<nlohmann::json> slices;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks[{e["pid"], e["tid"]}] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "process_name") processes[e["pid"]] = e["args"]["name"];
    if (e["ph"] == "X") slices.push_back(e);
  }
  EXPECT_EQ(processes[1], "job job-1");
  EXPECT_EQ(processes.size(), 3u) << "the job and two nodes";
  ASSERT_EQ(tracks.size(), 4u) << "steps and three actors";
  std::map<std::string, std::pair<int, int>> by_name;
  for (const auto& [key, name] : tracks) by_name[name.substr(0, name.find(' '))] = key;
  EXPECT_EQ(tracks[by_name["steps"]], "steps");
  ASSERT_EQ(by_name.count("actor-lost"), 1u);
  EXPECT_EQ(by_name["actor-lost"].first, by_name["grpo_generator"].first) << "one process per node";
  EXPECT_NE(by_name["trainer-0"].first, by_name["grpo_generator"].first);
  EXPECT_NE(tracks[by_name["actor-lost"]].find("no calls: its node is gone"), std::string::npos);
  EXPECT_NE(tracks[by_name["trainer-0"]].find("7 older calls not kept"), std::string::npos);

  // The step, its two phases that took time, and three calls; times relative to the first.
  std::map<std::string, std::vector<nlohmann::json>> named;
  for (const nlohmann::json& s : slices) named[s["name"]].push_back(s);
  ASSERT_EQ(named["step 1"].size(), 1u);
  EXPECT_EQ(named["step 1"][0]["ts"], 0);
  EXPECT_EQ(named["step 1"][0]["dur"], 500000);
  EXPECT_EQ(named["generate"].size(), 2u) << "the phase and the engine's call";
  EXPECT_EQ(named.count("wait"), 0u) << "a phase that took no time is left out";
  ASSERT_EQ(named["train"].size(), 2u);
  ASSERT_EQ(named["train (not run)"].size(), 1u);
  const nlohmann::json& late = named["train (not run)"][0];
  EXPECT_EQ(late["ts"], 495000);
  EXPECT_EQ(late["args"]["code"], 4);
  EXPECT_EQ(std::make_pair(late["pid"].get<int>(), late["tid"].get<int>()), by_name["trainer-0"]);
  for (const nlohmann::json& g : named["generate"])
    if (g["cat"] == "call") {
      EXPECT_EQ(g["ts"], 2000);
      EXPECT_EQ(g["dur"], 188000);
      EXPECT_EQ(g["args"]["queued_us"], 1000);
    }
  EXPECT_EQ(slices.size(), 6u);
}

TEST(TelemetryViewTest, TimelineSkipsFieldsOfTheWrongTypeAndReplacesBadUtf8) {
  const int64_t t0 = 1'800'000'000'000'000;
  std::vector<std::string> steps = {
      // Every field but the start of the wrong type, and phases that are not objects.
      nlohmann::json({{"step", "one"},
                      {"step_s", "long"},
                      {"mean_reward", nullptr},
                      {"start_unix_us", t0},
                      {"phases",
                       {7,
                        "generate",
                        {{"phase", 3}, {"start_unix_us", t0}, {"end_unix_us", t0 + 10}},
                        {{"phase", "train"}, {"start_unix_us", "soon"}, {"end_unix_us", t0 + 10}}}}})
          .dump(),
      nlohmann::json({{"step", 2}, {"start_unix_us", t0 + 100}, {"phases", "none"}}).dump(),
      nlohmann::json::array({1, 2}).dump(),
  };
  std::vector<ActorCalls> actors(1);
  actors[0].actor.set_actor_id("actor-x");
  actors[0].error = std::string(199, 'e') + "\xc3\xa9 and more";  // cut inside the two-byte character

  const std::string out = RenderTimeline("job-2", steps, actors);
  nlohmann::json trace = nlohmann::json::parse(out);  // valid JSON, hence valid UTF-8
  std::map<std::string, nlohmann::json> named;
  for (const nlohmann::json& e : trace["traceEvents"])
    if (e["ph"] == "X") named[e["name"]] = e;
  ASSERT_EQ(named.size(), 3u) << out;
  EXPECT_EQ(named["step 0"]["dur"], 0) << "a step number or length of another type reads as 0";
  EXPECT_EQ(named["step 2"]["ts"], 100);
  EXPECT_EQ(named["phase"]["dur"], 10) << "a phase named by a number gets the generic name";
  EXPECT_EQ(named["phase"]["args"]["step"], 0);
}

}  // namespace
}  // namespace skyrl::views
