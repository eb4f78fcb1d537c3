// ActorDirectoryImpl over gRPC: CreateActors answers each item on its own.
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
#include "runtime/head/actor_directory_service.h"
#include "runtime/rpc/auth.h"
#include "tests/util/loopback_server.h"

namespace skyrl::head {
namespace {

TEST(ActorDirectoryServiceTest, CreateActorsOverGrpcAnswersPerItem) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  AddGpuNode(*head, 3003, 2);
  const std::string token = "head-async-test-token-0123456789";
  rpc::TokenAuth auth(token);
  ActorDirectoryImpl service(head->actors(), auth);
  testing::LoopbackServer loopback = testing::StartLoopbackServer({&service});
  ASSERT_TRUE(loopback.server && loopback.port > 0);
  auto stub = v1::ActorDirectory::NewStub(loopback.Channel());

  v1::CreateActorsRequest req;
  *req.add_specs() = Spec("echo", 1);
  *req.add_specs() = Spec("echo", 4);  // never fits a 2-GPU cluster
  *req.add_specs() = Spec("echo", 1);
  v1::CreateActorsReply reply;
  {
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, token, absl::Seconds(10));
    grpc::Status st = stub->CreateActors(&ctx, req, &reply);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  ASSERT_EQ(reply.results_size(), 3);
  EXPECT_EQ(reply.results(0).code(), 0);
  EXPECT_EQ(reply.results(0).actor().state(), v1::ACTOR_ALIVE);
  EXPECT_EQ(reply.results(1).code(), int(absl::StatusCode::kResourceExhausted));
  EXPECT_NE(reply.results(1).message().find("GPU"), std::string::npos) << reply.results(1).message();
  EXPECT_FALSE(reply.results(1).has_actor());
  EXPECT_EQ(reply.results(2).code(), 0);
  EXPECT_EQ(reply.results(2).actor().state(), v1::ACTOR_ALIVE);
  EXPECT_NE(reply.results(0).actor().actor_id(), reply.results(2).actor().actor_id());

  {  // an empty batch and a batch over the limit are refused as a whole, naming the field
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, token, absl::Seconds(10));
    v1::CreateActorsReply r;
    grpc::Status st = stub->CreateActors(&ctx, v1::CreateActorsRequest(), &r);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("specs"), std::string::npos) << st.error_message();
  }
  {
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, token, absl::Seconds(10));
    v1::CreateActorsRequest big;
    for (int i = 0; i <= kMaxCreateBatch; ++i) big.add_specs()->set_class_name("echo");
    v1::CreateActorsReply r;
    grpc::Status st = stub->CreateActors(&ctx, big, &r);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("at most 10000"), std::string::npos) << st.error_message();
  }
  {  // no token: refused before anything is created
    grpc::ClientContext ctx;
    v1::CreateActorsReply r;
    grpc::Status st = stub->CreateActors(&ctx, req, &r);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(head->actors().List().size(), 2u);
  loopback.server->Shutdown();
}

}  // namespace
}  // namespace skyrl::head
