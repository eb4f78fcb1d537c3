// The head's dashboard (dashboard.h) served by a started head over real HTTP: sign-in, what
// is refused without it, and the JSON the pages draw.
#include "runtime/head/dashboard.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/ids.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/common/job_metrics_keys.h"
#include "runtime/head/kv_service.h"
#include "runtime/store/memory/memory_store.h"
#include "tests/runtime/head/fake_workers.h"
#include "tests/runtime/head/head_fixture.h"
#include "tests/runtime/http/http_client.h"

namespace skyrl::head {
namespace {

using ::skyrl::testing::HttpFetch;
using ::skyrl::testing::HttpReply;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kToken[] = "dashboard-test-token-0123456789";

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HeadOptions options;
    options.port = 0;
    options.dashboard_port = 0;
    options.token = kToken;
    options.jobs_dir = ::testing::TempDir() + "/dashboard-test-jobs";
    absl::StatusOr<std::unique_ptr<Head>> head = Head::Open(options, store_, workers_, clock_);
    ASSERT_TRUE(head.ok()) << head.status();
    head_ = std::move(*head);
    ASSERT_TRUE(head_->Start().ok());
    port_ = head_->dashboard_port();
    ASSERT_GT(port_, 0);
  }

  HttpReply Get(const std::string& path, const std::map<std::string, std::string>& headers = {}) {
    return HttpFetch(port_, "GET", path, headers);
  }
  // Signs in through the form; the Cookie header to send.
  std::string SignIn() {
    HttpReply r = HttpFetch(port_, "POST", "/login", {}, std::string("token=") + kToken);
    EXPECT_EQ(r.status, 303);
    EXPECT_EQ(r.Header("location"), "/");
    const std::string cookie = r.Header("set-cookie");
    EXPECT_THAT(cookie, HasSubstr("HttpOnly"));
    EXPECT_THAT(cookie, HasSubstr("SameSite=Strict"));
    return cookie.substr(0, cookie.find(';'));
  }
  nlohmann::json Json(const std::string& path, const std::string& cookie) {
    HttpReply r = Get(path, {{"Cookie", cookie}});
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    return nlohmann::json::parse(r.body, nullptr, false);
  }

  store::MemoryStore store_;
  FakeClock clock_;
  testing::FakeWorkers workers_;
  std::unique_ptr<Head> head_;
  int port_ = 0;
};

TEST_F(DashboardTest, ServesOnlyTheLoginPageWithoutTheToken) {
  HttpReply page = Get("/");
  EXPECT_EQ(page.status, 303);
  EXPECT_EQ(page.Header("location"), "/login");
  EXPECT_EQ(Get("/static/app.js").status, 303);
  for (const char* api : {"/api/nodes", "/api/actors", "/api/placement-groups", "/api/jobs"}) {
    HttpReply r = Get(api);
    EXPECT_EQ(r.status, 401) << api;
    EXPECT_THAT(r.Header("www-authenticate"), HasSubstr("Bearer"));
    EXPECT_THAT(r.body, Not(HasSubstr("node_id")));
  }
  HttpReply login = Get("/login");
  EXPECT_EQ(login.status, 200);
  EXPECT_THAT(login.body, HasSubstr("name=\"token\""));
  EXPECT_EQ(Get("/static/style.css").status, 200) << "the login page's style sheet";

  HttpReply wrong = HttpFetch(port_, "POST", "/login", {}, "token=not-the-cluster-token-000");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_THAT(wrong.body, HasSubstr("Wrong token"));
  EXPECT_EQ(wrong.Header("set-cookie"), "");
  EXPECT_EQ(Get("/api/nodes", {{"Cookie", "skyrl_session=made-up"}}).status, 401);
  EXPECT_EQ(Get("/api/nodes", {{"Authorization", "Bearer not-the-cluster-token-000"}}).status, 401);
}

TEST_F(DashboardTest, ASignedInBrowserGetsThePagesUntilItsSessionEnds) {
  const std::string cookie = SignIn();
  HttpReply page = Get("/", {{"Cookie", cookie}});
  EXPECT_EQ(page.status, 200);
  EXPECT_THAT(page.Header("content-type"), HasSubstr("text/html"));
  EXPECT_THAT(page.body, HasSubstr("/static/app.js"));
  HttpReply script = Get("/static/app.js", {{"Cookie", cookie}});
  EXPECT_EQ(script.status, 200);
  EXPECT_THAT(script.Header("content-type"), HasSubstr("javascript"));
  EXPECT_EQ(Get("/static/nothing.js", {{"Cookie", cookie}}).status, 404);
  EXPECT_EQ(Get("/static/login.html", {{"Cookie", cookie}}).status, 404);

  clock_.Advance(absl::Hours(11));
  EXPECT_EQ(Get("/api/nodes", {{"Cookie", cookie}}).status, 200);
  clock_.Advance(absl::Hours(2));  // past the 12 h a login lasts
  EXPECT_EQ(Get("/api/nodes", {{"Cookie", cookie}}).status, 401);

  const std::string again = SignIn();
  EXPECT_EQ(Get("/api/nodes", {{"Cookie", again}}).status, 200);
  HttpReply out = HttpFetch(port_, "POST", "/logout", {{"Cookie", again}});
  EXPECT_EQ(out.status, 303);
  EXPECT_THAT(out.Header("set-cookie"), HasSubstr("Max-Age=0"));
  EXPECT_EQ(Get("/api/nodes", {{"Cookie", again}}).status, 401) << "signed out";
}

TEST_F(DashboardTest, ServesTheClusterAsTheCliPrintsIt) {
  v1::NodeInfo node;
  node.set_address("127.0.0.1:9001");
  node.set_hostname("gpu-host-1");
  (*node.mutable_resources_total())["CPU"] = 8;
  (*node.mutable_resources_total())["GPU"] = 4;
  for (int g = 0; g < 4; ++g) node.add_gpu_ids(g);
  (*node.mutable_labels())["zone"] = "a";
  absl::StatusOr<NodeId> id = head_->nodes().Register(node);
  ASSERT_TRUE(id.ok());
  v1::PlacementGroupSpec spec;
  spec.set_name("train");
  (*spec.add_bundles()->mutable_resources())["GPU"] = 2;
  (*spec.add_bundles()->mutable_resources())["GPU"] = 1;
  ASSERT_TRUE(head_->groups().Create(spec).ok());

  // A program authenticates with the token as a header.
  const std::map<std::string, std::string> bearer = {{"Authorization", std::string("Bearer ") + kToken}};
  HttpReply nodes_reply = Get("/api/nodes", bearer);
  ASSERT_EQ(nodes_reply.status, 200);
  EXPECT_EQ(nodes_reply.Header("content-type"), "application/json");
  nlohmann::json nodes = nlohmann::json::parse(nodes_reply.body);
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0]["node_id"], id->ToString());
  EXPECT_EQ(nodes[0]["hostname"], "gpu-host-1");
  EXPECT_EQ(nodes[0]["resources"]["GPU"], 4);
  EXPECT_EQ(nodes[0]["used"]["GPU"], 3) << "both bundles";
  EXPECT_EQ(nodes[0]["labels"]["zone"], "a");

  const std::string cookie = SignIn();
  nlohmann::json groups = Json("/api/placement-groups", cookie);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]["name"], "train");
  EXPECT_EQ(groups[0]["state"], "CREATED");
  ASSERT_EQ(groups[0]["bundles"].size(), 2u);
  EXPECT_EQ(groups[0]["bundles"][0]["gpu_ids"], nlohmann::json({0, 1})) << "bundle order kept";
  EXPECT_EQ(groups[0]["bundles"][1]["gpu_ids"], nlohmann::json({2}));
  EXPECT_TRUE(Json("/api/actors", cookie).is_array());
  EXPECT_EQ(Json("/api/jobs", cookie), nlohmann::json::array());

  EXPECT_EQ(HttpFetch(port_, "POST", "/api/nodes", {{"Cookie", cookie}}).status, 405);
  EXPECT_EQ(Get("/api/nothing", {{"Cookie", cookie}}).status, 404);
}

TEST_F(DashboardTest, ServesAJobsLogTailAndItsStepMetricsInStepOrder) {
  v1::JobSpec spec;
  spec.set_submission_id("dash-job-1");
  for (const char* arg : {"sh", "-c", "echo first line; echo second line"}) spec.add_entrypoint(arg);
  absl::StatusOr<v1::JobInfo> job = head_->jobs().Submit(spec, "", "test");
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string cookie = SignIn();
  nlohmann::json info;
  for (int i = 0; i < 500; ++i) {
    info = Json("/api/jobs/dash-job-1", cookie);
    if (info["state"] == "SUCCEEDED") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(info["state"], "SUCCEEDED") << info.dump();

  HttpReply log = Get("/api/jobs/dash-job-1/log", {{"Cookie", cookie}});
  EXPECT_EQ(log.status, 200);
  EXPECT_THAT(log.body, HasSubstr("first line\nsecond line\n"));
  // A tail starts at a line: the 14 bytes "d line\n" + ... begin after the cut line.
  HttpReply tail = Get("/api/jobs/dash-job-1/log?tail=14", {{"Cookie", cookie}});
  EXPECT_EQ(tail.body, "second line\n");
  EXPECT_EQ(Get("/api/jobs/dash-job-1/log?tail=lots", {{"Cookie", cookie}}).status, 400);
  EXPECT_EQ(Get("/api/jobs/no-such-job/log", {{"Cookie", cookie}}).status, 404);

  // Steps written out of order, and one value that is not JSON (a job's own bytes).
  ASSERT_TRUE(store_.Put(kKvTable, JobMetricsKey("dash-job-1", 2), R"({"step":2,"mean_reward":0.5})").ok());
  ASSERT_TRUE(store_.Put(kKvTable, JobMetricsKey("dash-job-1", 10), R"({"step":10,"mean_reward":0.9})").ok());
  ASSERT_TRUE(store_.Put(kKvTable, JobMetricsKey("dash-job-1", 1), R"({"step":1,"mean_reward":0.25})").ok());
  ASSERT_TRUE(store_.Put(kKvTable, JobMetricsKey("dash-job-1", 3), "not json").ok());
  ASSERT_TRUE(store_.Put(kKvTable, JobMetricsKey("dash-job-10", 1), R"({"step":99})").ok());
  nlohmann::json steps = Json("/api/jobs/dash-job-1/metrics", cookie);
  ASSERT_EQ(steps.size(), 3u) << steps.dump();
  EXPECT_EQ(steps[0]["step"], 1);
  EXPECT_EQ(steps[1]["step"], 2);
  EXPECT_EQ(steps[2]["step"], 10);
  EXPECT_EQ(steps[2]["mean_reward"], 0.9);

  // Deleting the job deletes its metrics, and only its.
  ASSERT_TRUE(head_->jobs().Delete("dash-job-1").ok());
  absl::StatusOr<std::vector<store::Entry>> left = store_.Scan(kKvTable, "jobs/");
  ASSERT_TRUE(left.ok());
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ((*left)[0].key, JobMetricsKey("dash-job-10", 1));
  EXPECT_EQ(Get("/api/jobs/dash-job-1/metrics", {{"Cookie", cookie}}).status, 404);
}

TEST_F(DashboardTest, AnActorsLogRefusesBadInputAndNamesWhatIsMissing) {
  const std::string cookie = SignIn();
  EXPECT_EQ(Get("/api/actors/not-an-id/log", {{"Cookie", cookie}}).status, 400);
  HttpReply unknown =
      Get(absl::StrCat("/api/actors/", ActorId::Random().ToString(), "/log"), {{"Cookie", cookie}});
  EXPECT_EQ(unknown.status, 404);
  EXPECT_THAT(unknown.body, HasSubstr("no actor"));
  EXPECT_EQ(
      Get(absl::StrCat("/api/actors/", ActorId::Random().ToString(), "/log?tail=many"), {{"Cookie", cookie}})
          .status,
      400);
  EXPECT_EQ(Get(absl::StrCat("/api/actors/", ActorId::Random().ToString(), "/log")).status, 401)
      << "signed out";
}

}  // namespace
}  // namespace skyrl::head
