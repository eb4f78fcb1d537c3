// skyrl::Client::CreateActors against the head's real ActorDirectory service (callback API,
// in process over gRPC), with workers replaced by a fake that starts actors at once and fails
// class "broken" like a constructor error.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "runtime/client/client.h"
#include "runtime/head/actor_directory_service.h"
#include "runtime/head/actor_manager.h"
#include "runtime/head/node_events.h"
#include "runtime/head/node_manager.h"
#include "runtime/head/placement_group_manager.h"
#include "runtime/head/resource_tracker.h"
#include "runtime/rpc/auth.h"
#include "runtime/store/memory/memory_store.h"
#include "tests/util/loopback_server.h"

namespace skyrl::head {
namespace {

constexpr char kToken[] = "client-create-actors-token-0123456789";

class FakeWorkers final : public WorkerClient {
 public:
  absl::StatusOr<v1::StartActorReply> StartActor(const std::string& address, const v1::StartActorRequest& req) override {
    if (req.class_name() == "broken") return absl::FailedPreconditionError("constructor of broken failed: no config");
    v1::StartActorReply r;
    r.set_address(absl::StrCat(address, "/", req.actor_id()));
    return r;
  }
  absl::Status KillActor(const std::string&, const std::string&) override { return absl::OkStatus(); }
};

TEST(ClientCreateActorsTest, EachItemIsCreatedOrExplainedOnItsOwn) {
  store::MemoryStore store;
  FakeClock clock;
  FakeWorkers workers;
  NodeManager nodes(store, clock, {absl::Seconds(1), 5});
  ResourceTracker tracker;
  ActorManager actors(store, nodes, tracker, workers, clock);
  PlacementGroupManager groups(store, tracker, actors, clock);
  SchedulingNodeListener listener(tracker, actors, groups);
  nodes.SetListener(&listener);
  v1::NodeInfo node;
  node.set_address("127.0.0.1:1");
  (*node.mutable_resources_total())["CPU"] = 8;
  (*node.mutable_resources_total())["GPU"] = 2;
  node.add_gpu_ids(0);
  node.add_gpu_ids(1);
  ASSERT_TRUE(nodes.Register(node).ok());

  rpc::TokenAuth auth(kToken);
  ActorDirectoryImpl service(actors, auth);
  testing::LoopbackServer loopback = testing::StartLoopbackServer({&service});
  ASSERT_TRUE(loopback.server && loopback.port > 0);

  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(loopback.address(), kToken);
  ASSERT_TRUE(client.ok()) << client.status();
  auto opts = [](double gpus, const std::string& name = "") {
    ActorOptions o;
    o.resources = {{"GPU", gpus}};
    o.name = name;
    return o;
  };
  std::vector<absl::StatusOr<ActorHandle>> r = (*client)->CreateActors({{"echo", opts(1, "engine-0")},
                                                                         {"echo", opts(8)},
                                                                         {"broken", opts(1)},
                                                                         {"echo", opts(1, "engine-0")},
                                                                         {"echo", opts(1, "engine-1")}});
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
  size_t before = actors.List().size();
  std::vector<absl::StatusOr<ActorHandle>> refused = (*stranger)->CreateActors({{"echo", opts(0)}, {"echo", opts(0)}});
  ASSERT_EQ(refused.size(), 2u);
  for (const auto& x : refused) EXPECT_TRUE(absl::IsUnauthenticated(x.status())) << x.status();
  EXPECT_EQ(actors.List().size(), before);
  EXPECT_TRUE((*client)->CreateActors({}).empty());
  loopback.server->Shutdown();
}

}  // namespace
}  // namespace skyrl::head
