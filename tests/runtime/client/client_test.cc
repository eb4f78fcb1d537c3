// skyrl::Client against the head's real ActorDirectory service (callback API, in process over
// gRPC), with workers replaced by a fake that starts actors at once and fails class "broken"
// like a constructor error: CreateActors, and the deadlines of streamed calls (to a fake actor
// service that answers when the test says).
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <future>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/client/client.h"
#include "skyrl/actor.grpc.pb.h"
#include "runtime/common/subprocess.h"
#include "runtime/head/actor_directory_service.h"
#include "runtime/head/actor_manager.h"
#include "runtime/head/kv_service.h"
#include "runtime/head/node_events.h"
#include "runtime/head/node_manager.h"
#include "runtime/head/placement_group_manager.h"
#include "runtime/head/resource_tracker.h"
#include "runtime/rpc/auth.h"
#include "runtime/store/memory/memory_store.h"
#include "tests/runtime/head/fake_workers.h"
#include "tests/util/loopback_server.h"

namespace skyrl::head {
namespace {

constexpr char kToken[] = "client-create-actors-token-0123456789";

// The head's managers on a memory store with one node (CPU=8, `gpus` devices), workers faked.
struct InProcessHead {
  explicit InProcessHead(int gpus = 0) {
    nodes.SetListener(&listener);
    v1::NodeInfo node;
    node.set_address("127.0.0.1:1");
    (*node.mutable_resources_total())["CPU"] = 8;
    if (gpus > 0) (*node.mutable_resources_total())["GPU"] = gpus;
    for (int i = 0; i < gpus; ++i) node.add_gpu_ids(i);
    registered = nodes.Register(node).ok();
  }
  // As the head does: answers in flight run while the group manager is still here.
  ~InProcessHead() { actors.Stop(); }
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  ResourceTracker tracker;
  NodeManager nodes{store, clock, {absl::Seconds(1), 5}, nullptr, &tracker};
  EventLoop loop;
  DemandQueue demand{clock, /*paused=*/false, &loop};
  ActorManager actors{store, nodes, tracker, workers, demand, loop, clock};
  PlacementGroupManager groups{store, tracker, actors, demand, clock};
  SchedulingNodeListener listener{actors, groups};
  bool registered = false;
};

TEST(ClientCreateActorsTest, EachItemIsCreatedOrExplainedOnItsOwn) {
  // A GPU for each item that is placed: the broken one holds its GPU until its start's
  // answer is in, and the items are admitted before that.
  InProcessHead h(/*gpus=*/3);
  ASSERT_TRUE(h.registered);
  rpc::TokenAuth auth(kToken);
  ActorDirectoryImpl service(h.actors, auth);
  testing::LoopbackServer loopback = testing::StartLoopbackServer({&service});
  ASSERT_TRUE(loopback.server && loopback.port > 0);

  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(loopback.address(), kToken);
  ASSERT_TRUE(client.ok()) << client.status();
  auto opts = [](const std::string& class_name, double gpus, const std::string& name = "") {
    v1::ActorSpec spec = ActorSpecFor(class_name, {{"GPU", gpus}});
    spec.set_name(name);
    return spec;
  };
  std::vector<absl::StatusOr<ActorHandle>> r =
      (*client)->CreateActors({opts("echo", 1, "engine-0"), opts("echo", 8), opts("broken", 1),
                               opts("echo", 1, "engine-0"), opts("echo", 1, "engine-1")});
  ASSERT_EQ(r.size(), 5u);
  ASSERT_TRUE(r[0].ok()) << r[0].status();
  EXPECT_TRUE(absl::IsResourceExhausted(r[1].status())) << r[1].status();
  EXPECT_NE(r[1].status().message().find("GPU"), absl::string_view::npos) << r[1].status();
  EXPECT_TRUE(absl::IsFailedPrecondition(r[2].status())) << r[2].status();
  EXPECT_NE(r[2].status().message().find("no config"), absl::string_view::npos) << r[2].status();
  EXPECT_TRUE(absl::IsAlreadyExists(r[3].status())) << r[3].status();
  ASSERT_TRUE(r[4].ok()) << r[4].status();
  // What the client returned is what the head holds.
  absl::StatusOr<v1::ActorInfo> first = (*client)->Describe(*r[0]);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->state(), v1::ACTOR_ALIVE);
  EXPECT_EQ(first->spec().name(), "engine-0");
  absl::StatusOr<ActorHandle> by_name = (*client)->GetActor("engine-1");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->actor_id, r[4]->actor_id);

  // A call that fails as a whole (wrong token) fails every item, and creates nothing.
  absl::StatusOr<std::unique_ptr<Client>> stranger =
      Client::Connect(loopback.address(), "not-the-cluster-token-0123456789");
  ASSERT_TRUE(stranger.ok());
  size_t before = h.actors.List().size();
  std::vector<absl::StatusOr<ActorHandle>> refused =
      (*stranger)->CreateActors({opts("echo", 0), opts("echo", 0)});
  ASSERT_EQ(refused.size(), 2u);
  for (const auto& x : refused) EXPECT_TRUE(absl::IsUnauthenticated(x.status())) << x.status();
  EXPECT_EQ(h.actors.List().size(), before);
  EXPECT_TRUE((*client)->CreateActors({}).empty());
  loopback.server->Shutdown();
}

TEST(ClientKvTest, GetReturnsWhatPutStoredAndNotFoundForAnAbsentKey) {
  store::MemoryStore store;
  rpc::TokenAuth auth(kToken);
  KvServiceImpl service(store, auth);
  testing::LoopbackServer loopback = testing::StartLoopbackServer({&service});
  ASSERT_TRUE(loopback.server && loopback.port > 0);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(loopback.address(), kToken);
  ASSERT_TRUE(client.ok()) << client.status();

  EXPECT_TRUE(absl::IsNotFound((*client)->KvGet("app/absent").status()));
  const std::string binary("a\0b\xff", 4);
  ASSERT_TRUE((*client)->KvPut("app/key", binary).ok());
  absl::StatusOr<std::string> got = (*client)->KvGet("app/key");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, binary);
  ASSERT_TRUE((*client)->KvPut("app/key", "second").ok());  // Put replaces
  EXPECT_EQ((*client)->KvGet("app/key").value_or(""), "second");

  absl::StatusOr<std::unique_ptr<Client>> stranger =
      Client::Connect(loopback.address(), "not-the-cluster-token-0123456789");
  ASSERT_TRUE(stranger.ok());
  EXPECT_TRUE(absl::IsUnauthenticated((*stranger)->KvGet("app/key").status()));
  loopback.server->Shutdown();
}

// An actor's CallStream that answers "now" at once, holds "hold" calls unanswered, and
// answers every held call with "late" when it gets "release".
class HoldingActor final : public v1::ActorService::Service {
 public:
  grpc::Status CallStream(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::ActorResultBatch, v1::ActorCallBatch>* stream) override {
    std::vector<uint64_t> held;
    for (v1::ActorCallBatch in; stream->Read(&in);) {
      v1::ActorResultBatch out;
      auto answer = [&](uint64_t id, const std::string& result) {
        v1::StreamedResult* r = out.add_results();
        r->set_call_id(id);
        r->set_result(result);
      };
      for (const v1::StreamedCall& c : in.calls()) {
        if (c.method() == "hold") {
          held.push_back(c.call_id());
          continue;
        }
        if (c.method() == "release") {
          for (uint64_t id : held) answer(id, "late");
          held.clear();
        }
        answer(c.call_id(), "now");
      }
      if (out.results_size() > 0 && !stream->Write(out)) break;
    }
    return grpc::Status::OK;
  }
};

// An in-process head whose actors all serve at one `Service` (`actor`), and a client of it.
template <typename Service>
struct ServedCluster {
  ServedCluster() {
    actor_server = testing::StartLoopbackServer({&actor});
    h.workers.actor_address = actor_server.address();
    head = testing::StartLoopbackServer({&service});
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(head.address(), kToken);
    if (c.ok()) client = std::move(*c);
  }
  ~ServedCluster() {
    client.reset();
    h.workers.hold = false;
    h.workers.Release();  // the head's manager waits for the starts it began
    if (actor_server.server)
      actor_server.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    if (head.server) head.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }
  // Every part started: the node registered, both servers listening, the client connected.
  bool ok() const {
    return h.registered && actor_server.server && actor_server.port > 0 && head.server && head.port > 0 &&
           client != nullptr;
  }
  InProcessHead h;
  Service actor;
  testing::LoopbackServer actor_server;
  rpc::TokenAuth auth{kToken};
  ActorDirectoryImpl service{h.actors, auth};
  testing::LoopbackServer head;
  std::unique_ptr<Client> client;
};

using CallFuture = std::future<absl::StatusOr<std::string>>;
bool Settled(CallFuture& f) { return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }

TEST(ClientCallDeadlineTest, EachStreamedCallFailsAtItsOwnDeadlineAndTheOthersGoOn) {
  ServedCluster<HoldingActor> c;
  ASSERT_TRUE(c.ok());
  std::unique_ptr<Client>& client = c.client;
  absl::StatusOr<ActorHandle> actor = client->CreateActor("holding");
  ASSERT_TRUE(actor.ok()) << actor.status();
  ASSERT_EQ(*client->Call(*actor, "now", ""), "now");  // the stream is open

  // The first call's deadline is far away, so the expiry loop sleeps until then; each later,
  // earlier deadline must wake it. Deadlines are a second or more apart, so the order holds
  // on a loaded machine; no call may fail before its own deadline.
  const absl::Time start = absl::Now();
  CallFuture far = client->CallAsync(*actor, "hold", "", absl::Seconds(120));
  const std::vector<absl::Duration> timeouts = {absl::Milliseconds(300), absl::Milliseconds(1500),
                                                absl::Milliseconds(2700)};
  std::vector<CallFuture> held;
  // Enqueued latest deadline first: each is a new earliest deadline of the stream.
  for (auto t = timeouts.rbegin(); t != timeouts.rend(); ++t)
    held.push_back(client->CallAsync(*actor, "hold", "", *t));
  std::reverse(held.begin(), held.end());
  EXPECT_EQ(*client->Call(*actor, "now", ""), "now") << "a call after held ones is answered";
  for (size_t i = 0; i < held.size(); ++i) {
    ASSERT_EQ(held[i].wait_for(std::chrono::seconds(30)), std::future_status::ready)
        << "the call with timeout " << timeouts[i] << " never failed: the expiry loop slept through it";
    absl::Duration waited = absl::Now() - start;
    for (size_t j = i + 1; j < held.size(); ++j)
      EXPECT_FALSE(Settled(held[j])) << "timeout " << timeouts[j] << " settled before " << timeouts[i];
    EXPECT_FALSE(Settled(far));
    absl::StatusOr<std::string> r = held[i].get();
    EXPECT_TRUE(absl::IsDeadlineExceeded(r.status())) << r.status();
    EXPECT_NE(r.status().message().find(absl::StrCat("within ", absl::FormatDuration(timeouts[i]))),
              absl::string_view::npos)
        << r.status();
    EXPECT_GE(waited, timeouts[i]) << "failed before its deadline";
  }
  // The stream lives on: the far call is still pending, and answered when the actor answers.
  EXPECT_EQ(*client->Call(*actor, "release", ""), "now");
  ASSERT_EQ(far.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  absl::StatusOr<std::string> late = far.get();
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(*late, "late");
}

// Streams to an actor whose port refuses connections end as soon as they start, on gRPC's
// threads, while the caller is still recording them. Under node churn that race left the
// client holding a freed stream: its expiry loop crashed, or its destructor waited forever.
// Here thousands of such streams are opened; the client must then fail every call and be
// destroyed promptly.
TEST(ClientStreamTest, StreamsThatEndAtOnceLeaveNothingBehind) {
  InProcessHead h;
  ASSERT_TRUE(h.registered);
  absl::StatusOr<int> closed = PickFreePort();  // nothing listens there
  ASSERT_TRUE(closed.ok());
  h.workers.actor_address = absl::StrCat("127.0.0.1:", *closed);
  rpc::TokenAuth auth(kToken);
  ActorDirectoryImpl service(h.actors, auth);
  testing::LoopbackServer head = testing::StartLoopbackServer({&service});
  ASSERT_TRUE(head.server && head.port > 0);

  ClientOptions options;
  options.call_timeout = absl::Milliseconds(50);  // the expiry loop runs all the time
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(head.address(), kToken, options);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<ActorHandle> actor = (*client)->CreateActor("echo");
  ASSERT_TRUE(actor.ok()) << actor.status();
  std::vector<CallFuture> calls;
  for (absl::Time end = absl::Now() + absl::Seconds(3); absl::Now() < end;)
    calls.push_back((*client)->CallAsync(*actor, "echo", "x"));
  ASSERT_GT(calls.size(), 100u);

  // The destructor fails what is still in flight; it must not hang or touch a freed stream.
  std::promise<void> destroyed;
  std::thread destroyer([&] {
    client->reset();
    destroyed.set_value();
  });
  if (destroyed.get_future().wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    ADD_FAILURE() << "the client's destructor hung after " << calls.size() << " calls on failing streams";
    destroyer.detach();
    std::quick_exit(1);  // the client's threads are stuck: nothing can be torn down cleanly
  }
  destroyer.join();
  for (CallFuture& f : calls) {
    ASSERT_TRUE(Settled(f)) << "a call was left without a result";
    absl::StatusOr<std::string> r = f.get();
    EXPECT_FALSE(r.ok());
    EXPECT_TRUE(absl::IsUnavailable(r.status()) || absl::IsCancelled(r.status()) ||
                absl::IsDeadlineExceeded(r.status()))
        << r.status();
  }
  head.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

// An actor's CallStream that answers every call at once and records the methods in the order
// they came: "list" answers with them joined by commas. The first N times each is called,
// "unavailable-N" fails with UNAVAILABLE (the method's own error), "again-N" answers "again"
// and "die-N" ends the stream as a dying process would; then they answer "ok".
class RecordingActor final : public v1::ActorService::Service {
 public:
  grpc::Status CallStream(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::ActorResultBatch, v1::ActorCallBatch>* stream) override {
    for (v1::ActorCallBatch in; stream->Read(&in);) {
      v1::ActorResultBatch out;
      for (const v1::StreamedCall& c : in.calls()) {
        v1::StreamedResult* r = out.add_results();
        r->set_call_id(c.call_id());
        absl::MutexLock lock(&mu_);
        const std::string& m = c.method();
        if (m == "list") {
          r->set_result(absl::StrJoin(methods_, ","));
          continue;
        }
        methods_.push_back(m);
        const int seen = ++counts_[m];
        int n = 0;
        if (absl::StartsWith(m, "unavailable-") && absl::SimpleAtoi(m.substr(12), &n) && seen <= n) {
          r->set_code(int(absl::StatusCode::kUnavailable));
          r->set_message("the actor died under the call");
        } else if (absl::StartsWith(m, "die-") && absl::SimpleAtoi(m.substr(4), &n) && seen <= n) {
          return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the actor's process died");
        } else if (absl::StartsWith(m, "again-") && absl::SimpleAtoi(m.substr(6), &n) && seen <= n) {
          r->set_result("again");
        } else {
          r->set_result("ok");
        }
      }
      if (!stream->Write(out)) break;
    }
    return grpc::Status::OK;
  }
  int Count(const std::string& method) {
    absl::MutexLock lock(&mu_);
    return counts_[method];
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> methods_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> counts_ ABSL_GUARDED_BY(mu_);
};

using RecordingCluster = ServedCluster<RecordingActor>;

TEST(ClientCallQueueTest, CallsToAStartingActorReturnAtOnceAndGoOutInOrderOnceItIsAlive) {
  RecordingCluster c;
  ASSERT_TRUE(c.ok());
  c.h.workers.hold = true;  // the actor's start waits for Release
  absl::StatusOr<ActorHandle> actor =
      c.client->CreateActor(ActorSpecFor("recording"), /*return_pending=*/true);
  ASSERT_TRUE(actor.ok()) << actor.status();
  ASSERT_EQ(c.h.workers.Parked(), 1u);

  // Every call returns while the actor is still starting: none can have gone anywhere.
  std::vector<CallFuture> calls;
  std::string expected;
  for (int i = 0; i < 300; ++i) {
    calls.push_back(c.client->CallAsync(*actor, absl::StrCat("c", i), ""));
    absl::StrAppend(&expected, i == 0 ? "" : ",", "c", i);
  }
  absl::StatusOr<v1::ActorInfo> info = c.client->Describe(*actor);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_NE(info->state(), v1::ACTOR_ALIVE);
  for (CallFuture& f : calls) EXPECT_FALSE(Settled(f)) << "a call settled before its actor started";

  c.h.workers.Release();
  for (CallFuture& f : calls) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    absl::StatusOr<std::string> r = f.get();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, "ok");
  }
  absl::StatusOr<std::string> order = c.client->Call(*actor, "list", "");
  ASSERT_TRUE(order.ok()) << order.status();
  EXPECT_EQ(*order, expected) << "the calls that waited went out out of order";
}

TEST(ClientCallQueueTest, CallsWaitingForAnActorThatDiesFailSayingSoAndShutdownCancelsTheRest) {
  RecordingCluster c;
  ASSERT_TRUE(c.ok());
  c.h.workers.hold = true;
  absl::StatusOr<ActorHandle> doomed =
      c.client->CreateActor(ActorSpecFor("recording"), /*return_pending=*/true);
  ASSERT_TRUE(doomed.ok()) << doomed.status();
  CallFuture before = c.client->CallAsync(*doomed, "c", "");
  ASSERT_TRUE(c.client->Kill(*doomed).ok());
  ASSERT_EQ(before.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  absl::StatusOr<std::string> r = before.get();
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("actor is dead"), absl::string_view::npos) << r.status();

  // Calls still waiting when the client goes fail with Cancelled; the destructor does not
  // wait for the actor.
  absl::StatusOr<ActorHandle> waiting =
      c.client->CreateActor(ActorSpecFor("recording"), /*return_pending=*/true);
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  std::vector<CallFuture> held;
  for (int i = 0; i < 10; ++i) held.push_back(c.client->CallAsync(*waiting, "c", ""));
  c.client.reset();
  for (CallFuture& f : held) {
    ASSERT_TRUE(Settled(f)) << "a waiting call outlived its client";
    absl::StatusOr<std::string> out = f.get();
    EXPECT_TRUE(absl::IsCancelled(out.status())) << out.status();
  }
}

TEST(ClientRetryTest, ACallIsMadeAgainWhenItsActorDiesOrItsResultAsksUpToItsRetries) {
  RecordingCluster c;
  ASSERT_TRUE(c.ok());
  absl::StatusOr<ActorHandle> actor = c.client->CreateActor("recording");
  ASSERT_TRUE(actor.ok()) << actor.status();
  auto call = [&](const std::string& method, int retries, bool retry_again) {
    CallOptions o;
    o.retries = retries;
    if (retry_again) o.retry_result = [](const std::string& r) { return r == "again"; };
    return c.client->CallAsync(*actor, method, "", std::move(o)).get();
  };
  // The actor's process dies under the call (the stream breaks): made again, and answered.
  // (The head still has it ALIVE at the same address, so the client first gives the head
  // its 5 s to hear of the death.)
  absl::StatusOr<std::string> r = call("die-1", 1, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "ok");
  EXPECT_EQ(c.actor.Count("die-1"), 2);
  // An Unavailable the method itself returns is its result, as in Ray: not made again.
  r = call("unavailable-1", 3, false);
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_EQ(c.actor.Count("unavailable-1"), 1);
  // A result the caller asks to retry for, without end (-1).
  r = call("again-4", -1, true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "ok");
  EXPECT_EQ(c.actor.Count("again-4"), 5);
  // The same result is an answer when nothing asks to retry it.
  r = call("again-1", 2, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "again");
  // Bad options are refused, naming the field, and nothing is sent.
  r = call("unavailable-0", -2, false);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("CallOptions.retries"), absl::string_view::npos) << r.status();
  EXPECT_EQ(c.actor.Count("unavailable-0"), 0);
}

TEST(ClientPendingLimitTest, AnActorsMaxPendingCallsBoundsThisClientsUnsettledCalls) {
  ServedCluster<HoldingActor> c;
  ASSERT_TRUE(c.ok());
  std::unique_ptr<Client>& client = c.client;

  v1::ActorSpec spec = ActorSpecFor("holding");
  spec.set_max_pending_calls(2);
  absl::StatusOr<ActorHandle> actor = client->CreateActor(spec);
  ASSERT_TRUE(actor.ok()) << actor.status();
  CallFuture first = client->CallAsync(*actor, "hold", "");
  CallFuture second = client->CallAsync(*actor, "hold", "");
  CallFuture third = client->CallAsync(*actor, "hold", "");
  ASSERT_TRUE(Settled(third)) << "the call over the limit is refused at once";
  absl::StatusOr<std::string> refused = third.get();
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("max_pending_calls=2"), absl::string_view::npos)
      << refused.status();
  EXPECT_FALSE(Settled(first));
  EXPECT_FALSE(Settled(second));

  // A call that opts out is not counted; once results come in, calls are taken again.
  CallOptions unlimited;
  unlimited.pending_limit = false;
  EXPECT_EQ(*client->CallAsync(*actor, "release", "", unlimited).get(), "now");
  EXPECT_EQ(*first.get(), "late");
  EXPECT_EQ(*second.get(), "late");
  absl::StatusOr<std::string> again = client->Call(*actor, "now", "");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, "now");
}

}  // namespace
}  // namespace skyrl::head
