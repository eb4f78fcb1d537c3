// PlacementGroupServiceImpl over gRPC: CreatePlacementGroups answers each item on its own.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "runtime/store/memory/memory_store.h"
#include "tests/runtime/head/head_fixture.h"
#include "runtime/head/placement_group_service.h"
#include "runtime/rpc/auth.h"
#include "tests/util/loopback_server.h"

namespace skyrl::head {
namespace {

TEST(PlacementGroupServiceTest, CreatePlacementGroupsOverGrpcAnswersPerItem) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  AddGpuNode(*head, 3004, 4);
  const std::string token = "head-async-test-token-0123456789";
  rpc::TokenAuth auth(token);
  PlacementGroupServiceImpl service(head->groups(), auth);
  testing::LoopbackServer loopback = testing::StartLoopbackServer({&service});
  ASSERT_TRUE(loopback.server && loopback.port > 0);
  auto stub = v1::PlacementGroupService::NewStub(loopback.Channel());
  auto group = [](double gpus, const std::string& name) {
    v1::PlacementGroupSpec spec;
    spec.set_name(name);
    (*spec.add_bundles()->mutable_resources())["GPU"] = gpus;
    return spec;
  };
  v1::CreatePlacementGroupsRequest req;
  *req.add_specs() = group(2, "trainer");       // fits
  *req.add_specs() = v1::PlacementGroupSpec();  // invalid: no bundles
  *req.add_specs() = group(16, "huge");         // can never fit a 4-GPU cluster
  *req.add_specs() = group(1, "trainer");       // name taken by the first item
  *req.add_specs() = group(2, "engines");       // fits beside the first
  *req.add_specs() = group(1, "late");          // fits later: PENDING, with the reason
  v1::CreatePlacementGroupsReply reply;
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token, absl::Seconds(10));
  grpc::Status st = stub->CreatePlacementGroups(&ctx, req, &reply);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(reply.results_size(), 6);
  EXPECT_EQ(reply.results(0).code(), 0);
  EXPECT_EQ(reply.results(0).group().state(), v1::PG_CREATED);
  EXPECT_EQ(reply.results(1).code(), int(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(reply.results(1).message().find("spec.bundles"), std::string::npos) << reply.results(1).message();
  EXPECT_EQ(reply.results(2).code(), int(absl::StatusCode::kResourceExhausted));
  EXPECT_NE(reply.results(2).message().find("GPU"), std::string::npos) << reply.results(2).message();
  EXPECT_EQ(reply.results(3).code(), int(absl::StatusCode::kAlreadyExists));
  EXPECT_EQ(reply.results(4).code(), 0);
  EXPECT_EQ(reply.results(4).group().state(), v1::PG_CREATED);
  EXPECT_EQ(reply.results(5).code(), 0);
  EXPECT_EQ(reply.results(5).group().state(), v1::PG_PENDING);
  EXPECT_FALSE(reply.results(5).group().pending_reason().empty());
  EXPECT_EQ(head->groups().List().size(), 3u);  // failed items left nothing behind
  absl::Status s = Check(*head);
  EXPECT_TRUE(s.ok()) << s;
  {
    grpc::ClientContext empty_ctx;
    rpc::PrepareCall(&empty_ctx, token, absl::Seconds(10));
    v1::CreatePlacementGroupsReply r;
    grpc::Status empty = stub->CreatePlacementGroups(&empty_ctx, v1::CreatePlacementGroupsRequest(), &r);
    EXPECT_EQ(empty.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(empty.error_message().find("specs"), std::string::npos) << empty.error_message();
  }
  loopback.server->Shutdown();
}

}  // namespace
}  // namespace skyrl::head
