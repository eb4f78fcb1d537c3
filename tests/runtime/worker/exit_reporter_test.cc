// worker::ExitReporter, one Step at a time against a fake head: order, retries while the head
// is away, refusals dropped, nothing sent before the node has an id.
#include "runtime/worker/exit_reporter.h"

#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"

namespace skyrl::worker {
namespace {

v1::ActorExitInfo Exit(const std::string& actor) {
  v1::ActorExitInfo e;
  e.set_actor_id(actor);
  e.set_description("exit code 1");
  return e;
}

// Answers each report with the next queued status (OK when none is queued) and records it.
struct FakeHead {
  std::deque<absl::Status> answers;
  std::vector<v1::ReportActorExitRequest> seen;
  ExitReporter::Send Sender() {
    return [this](const v1::ReportActorExitRequest& r) {
      seen.push_back(r);
      if (answers.empty()) return absl::OkStatus();
      absl::Status s = answers.front();
      answers.pop_front();
      return s;
    };
  }
};

TEST(ExitReporterTest, SendsNothingBeforeTheNodeHasAnId) {
  FakeHead head;
  std::string node;
  ExitReporter r(head.Sender(), [&] { return node; });
  r.Add(Exit("a"));
  EXPECT_GT(r.Step(), absl::ZeroDuration());
  EXPECT_TRUE(head.seen.empty());
  EXPECT_EQ(r.pending(), 1u);
  node = "node-1";
  r.Step();
  ASSERT_EQ(head.seen.size(), 1u);
  EXPECT_EQ(head.seen[0].node_id(), "node-1");
  EXPECT_EQ(head.seen[0].exit().actor_id(), "a");
  EXPECT_EQ(r.pending(), 0u);
}

TEST(ExitReporterTest, KeepsTheOrderAndRetriesWhileTheHeadIsAway) {
  FakeHead head;
  head.answers = {absl::UnavailableError("head down"), absl::DeadlineExceededError("slow"), absl::OkStatus()};
  ExitReporter r(head.Sender(), [] { return std::string("node-1"); });
  r.Add(Exit("a"));
  r.Add(Exit("b"));
  EXPECT_GT(r.Step(), absl::ZeroDuration()) << "an error waits before the next try";
  EXPECT_GT(r.Step(), absl::ZeroDuration());
  EXPECT_EQ(r.pending(), 2u) << "nothing is dropped on a transient error";
  EXPECT_EQ(r.Step(), absl::ZeroDuration()) << "more to send: no wait";
  r.Step();
  EXPECT_EQ(r.pending(), 0u);
  std::vector<std::string> order;
  for (const auto& s : head.seen) order.push_back(s.exit().actor_id());
  EXPECT_EQ(order, (std::vector<std::string>{"a", "a", "a", "b"}));
}

TEST(ExitReporterTest, DropsAReportTheHeadRefusesAsInvalid) {
  FakeHead head;
  head.answers = {absl::InvalidArgumentError("exit.actor_id: not an actor id")};
  ExitReporter r(head.Sender(), [] { return std::string("node-1"); });
  r.Add(Exit("bad"));
  r.Add(Exit("good"));
  r.Step();
  EXPECT_EQ(r.pending(), 1u);
  r.Step();
  EXPECT_EQ(r.pending(), 0u);
  ASSERT_EQ(head.seen.size(), 2u);
  EXPECT_EQ(head.seen[1].exit().actor_id(), "good");
}

TEST(ExitReporterTest, ItsThreadReportsAndStops) {
  absl::Notification sent;
  ExitReporter r(
      [&](const v1::ReportActorExitRequest& req) {
        if (req.exit().actor_id() == "a") sent.Notify();
        return absl::OkStatus();
      },
      [] { return std::string("node-1"); });
  r.Start();
  r.Add(Exit("a"));
  EXPECT_TRUE(sent.WaitForNotificationWithTimeout(absl::Seconds(10)));
  r.Stop();
  r.Stop();  // idempotent
}

}  // namespace
}  // namespace skyrl::worker
