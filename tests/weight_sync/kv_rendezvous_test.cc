// The KV rendezvous against the head's real KvService (in-process server, memory store), and
// a TCP sync whose ranks find each other through it.
#include "weight_sync/kv_rendezvous.h"

#include <grpcpp/grpcpp.h>

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/head/kv_service.h"
#include "runtime/store/store.h"
#include "tests/util/loopback_server.h"
#include "tests/weight_sync/sync_harness.h"
#include "weight_sync/plan/hf_params.h"
#include "weight_sync/tcp/tcp_transport.h"

namespace skyrl::weight_sync {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "weight-sync-test-token-0123456789";

class KvRendezvousTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = store::OpenStore("memory", "test");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    auth_ = std::make_unique<rpc::TokenAuth>(kToken);
    service_ = std::make_unique<head::KvServiceImpl>(*store_, *auth_);
    skyrl::testing::LoopbackServer loopback = skyrl::testing::StartLoopbackServer({service_.get()});
    server_ = std::move(loopback.server);
    ASSERT_NE(server_, nullptr);
    address_ = loopback.address();
  }
  void TearDown() override { server_->Shutdown(); }
  std::unique_ptr<KvRendezvous> Client(const std::string& token = kToken) {
    auto r = KvRendezvous::Connect(address_, token);
    EXPECT_TRUE(r.ok()) << r.status();
    return std::move(*r);
  }

  std::unique_ptr<store::Store> store_;
  std::unique_ptr<rpc::TokenAuth> auth_;
  std::unique_ptr<head::KvServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST_F(KvRendezvousTest, PutGetOverwriteAndWait) {
  auto a = Client(), b = Client();
  ASSERT_TRUE(a->Put("ws/x", "1").ok());
  ASSERT_TRUE(a->Put("ws/x", "2").ok());  // overwrites (a new version's address)
  EXPECT_EQ(*b->Get("ws/x", absl::Seconds(1)), "2");
  std::thread later([&] {
    absl::SleepFor(absl::Milliseconds(100));
    ASSERT_TRUE(a->Put("ws/late", "here").ok());
  });
  auto got = b->Get("ws/late", absl::Seconds(5));
  later.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "here");
  auto missing = b->Get("ws/never", absl::Milliseconds(100));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("ws/never"));
}

TEST_F(KvRendezvousTest, WrongTokenIsUnauthenticated) {
  auto bad = Client("another-token-that-is-long-enough");
  absl::Status s = bad->Put("ws/x", "1");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("ws/x"));
  EXPECT_EQ(KvRendezvous::Connect("no-port", kToken).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(KvRendezvousTest, TcpSyncFindsItsPeersThroughTheHead) {
  auto w = testing::MakeWorld(MakeTransformer(TransformerConfig{}), Layout::Of(ModelParallel{.tp = 2}),
                              Layout::Engines(2, ModelParallel{.tp = 1}));
  ASSERT_TRUE(w.ok());
  std::vector<std::unique_ptr<KvRendezvous>> rdvs;
  std::vector<std::unique_ptr<Transport>> owned;
  std::vector<Transport*> senders, receivers;
  std::vector<std::unique_ptr<VersionedShard>> shards;
  for (int r = -2; r < 2; ++r) {  // two senders, two receivers, each with its own KV client
    rdvs.push_back(Client());
    TcpOptions o;
    o.rendezvous = rdvs.back().get();
    o.receiver_rank = r < 0 ? -1 : r;
    o.transfer.checksums = true;
    auto t = CreateTcpTransport(o);
    ASSERT_TRUE(t.ok()) << t.status();
    (r < 0 ? senders : receivers).push_back(t->get());
    owned.push_back(std::move(*t));
    if (r >= 0) shards.push_back(std::make_unique<VersionedShard>((*w)->rlayout[r].Bytes()));
  }
  auto weights = (*w)->Weights(1);
  std::vector<std::vector<uint8_t>> sender_shards = {(*w)->SenderShard(0, weights),
                                                     (*w)->SenderShard(1, weights)};
  auto res = testing::RunSync(**w, 1, sender_shards, senders, receivers, shards);
  ASSERT_EQ(res.FirstError(), "");
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(*shards[r]->Current().bytes == (*w)->Expected(r, weights));
}

}  // namespace
}  // namespace skyrl::weight_sync
