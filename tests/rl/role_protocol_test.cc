// The RL roles' wire protocol: every request and reply survives its encoding, malformed input
// is refused naming the method and field, and the driver's recovery is decided on codes.
#include "rl/job/role_protocol.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "rl/job/role_stubs.h"
#include "rl/job/wire.h"

namespace skyrl::rl::role {
namespace {

Rollout SmallRollout() {
  Rollout r;
  r.prompt_len = 2;
  r.sequences = torch::tensor({{1, 2, 3, 4}, {1, 2, 5, 0}}, torch::kInt64);
  r.valid = torch::tensor({{true, true, true, true}, {true, true, true, false}});
  r.response = torch::tensor({{3, 4}, {5, 0}}, torch::kInt64);
  r.logprobs = torch::tensor({{-0.5f, -0.25f}, {-1.0f, 0.0f}});
  r.mask = torch::tensor({{1.0f, 1.0f}, {1.0f, 0.0f}});
  return r;
}

TEST(RoleProtocolTest, TrainerRepliesAndRequestsRoundTrip) {
  TrainReply t{0.5, -0.25, 0.01, 0.2, 1.5, 7, 0.125};
  absl::StatusOr<TrainReply> t2 = DecodeTrainReply(Encode(t));
  ASSERT_TRUE(t2.ok()) << t2.status();
  EXPECT_EQ(t2->loss, 0.5);
  EXPECT_EQ(t2->kl, 0.01);
  EXPECT_EQ(t2->grad_norm, 1.5);
  EXPECT_EQ(t2->version, 7);
  EXPECT_EQ(t2->compute_s, 0.125);

  absl::StatusOr<SyncWeightsRequest> sw = DecodeSyncWeightsRequest(Encode(SyncWeightsRequest{{"a", "b"}}));
  ASSERT_TRUE(sw.ok()) << sw.status();
  EXPECT_EQ(sw->engines, (std::vector<std::string>{"a", "b"}));
  SyncWeightsReply swr;
  swr.version = 3;
  swr.failed = {{"b", "UNAVAILABLE: restarting"}};
  swr.bytes = 4096;
  absl::StatusOr<SyncWeightsReply> swr2 = DecodeSyncWeightsReply(Encode(swr));
  ASSERT_TRUE(swr2.ok()) << swr2.status();
  EXPECT_EQ(swr2->failed, swr.failed);
  EXPECT_EQ(swr2->bytes, 4096);

  WsRequest ws;
  ws.prefix = "grpo/pg/0";
  ws.engines = 2;
  ws.engine_tp = 2;
  ws.trainer_tp = 4;
  ws.rank = 3;
  ws.host = "10.0.0.7";
  ws.version = 5;
  absl::StatusOr<WsRequest> ws2 = DecodeWsRequest(Encode(ws));
  ASSERT_TRUE(ws2.ok()) << ws2.status();
  EXPECT_EQ(ws2->prefix, ws.prefix);
  EXPECT_EQ(ws2->engines, 2);
  EXPECT_EQ(ws2->engine_tp, 2);
  EXPECT_EQ(ws2->trainer_tp, 4);
  EXPECT_EQ(ws2->rank, 3);
  EXPECT_EQ(ws2->host, "10.0.0.7");
  EXPECT_EQ(ws2->version, 5);

  WsSendReply sent{4, 0.1, 0.2, 1 << 20, 2, 1, 4096};
  absl::StatusOr<WsSendReply> sent2 = DecodeWsSendReply(Encode(sent));
  ASSERT_TRUE(sent2.ok()) << sent2.status();
  EXPECT_EQ(sent2->tcp_connections, 2);
  EXPECT_EQ(sent2->local_connections, 1);
  EXPECT_EQ(sent2->direct_write_bytes, 4096);
}

TEST(RoleProtocolTest, EngineMessagesRoundTripWithTheirTensors) {
  GenerateRequest g{42, PromptBatch{torch::tensor({{5, 6}}, torch::kInt64), torch::tensor({{true, false}})}};
  absl::StatusOr<std::string> gb = Encode(g);
  ASSERT_TRUE(gb.ok()) << gb.status();
  absl::StatusOr<GenerateRequest> g2 = DecodeGenerateRequest(*gb);
  ASSERT_TRUE(g2.ok()) << g2.status();
  EXPECT_EQ(g2->seed, 42u);
  EXPECT_TRUE(torch::equal(g2->batch.tokens, g.batch.tokens));
  EXPECT_TRUE(torch::equal(g2->batch.valid, g.batch.valid));

  absl::StatusOr<std::string> rb = Encode(GenerateReply{3, 0.5, SmallRollout()});
  ASSERT_TRUE(rb.ok()) << rb.status();
  absl::StatusOr<GenerateReply> r2 = DecodeGenerateReply(*rb);
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(r2->version, 3);
  EXPECT_EQ(r2->rollout.prompt_len, 2);
  EXPECT_TRUE(torch::equal(r2->rollout.sequences, SmallRollout().sequences));

  LoadShardRequest shard{2, 1, 2, {{"w", torch::arange(6, torch::kFloat32).reshape({2, 3})}}};
  absl::StatusOr<std::string> sb = Encode(shard);
  ASSERT_TRUE(sb.ok()) << sb.status();
  absl::StatusOr<LoadShardRequest> s2 = DecodeLoadShardRequest(*sb);
  ASSERT_TRUE(s2.ok()) << s2.status();
  EXPECT_EQ(s2->version, 2);
  EXPECT_EQ(s2->rank, 1);
  ASSERT_EQ(s2->shard.size(), 1u);
  EXPECT_EQ(s2->shard[0].first, "w");
  EXPECT_TRUE(torch::equal(s2->shard[0].second, shard.shard[0].second));

  EngineStateReply st{"ASLEEP", 4, 3, 2, "0"};
  absl::StatusOr<EngineStateReply> st2 = DecodeEngineStateReply(Encode(st));
  ASSERT_TRUE(st2.ok()) << st2.status();
  EXPECT_EQ(st2->state, "ASLEEP");
  EXPECT_EQ(st2->sleeps, 3);
  EXPECT_EQ(st2->cuda_visible_devices, "0");
}

TEST(RoleProtocolTest, RewardAndReferenceRoundTrip) {
  ScoreRequest req{{{"12", "21"}, {"34", "43"}}, SmallRollout()};
  absl::StatusOr<std::string> rb = Encode(req);
  ASSERT_TRUE(rb.ok()) << rb.status();
  absl::StatusOr<ScoreRequest> req2 = DecodeScoreRequest(*rb);
  ASSERT_TRUE(req2.ok()) << req2.status();
  ASSERT_EQ(req2->examples.size(), 2u);
  EXPECT_EQ(req2->examples[1].target, "43");

  ScoreReply sc{Scored{{1.0f, 0.5f}, 0.75, 0.5, 3}, 0.01};
  absl::StatusOr<ScoreReply> sc2 = DecodeScoreReply(Encode(sc));
  ASSERT_TRUE(sc2.ok()) << sc2.status();
  EXPECT_EQ(sc2->scored.rewards, sc.scored.rewards);
  EXPECT_EQ(sc2->scored.response_tokens, 3);

  absl::StatusOr<std::string> lb = Encode(LogprobsReply{0.2, torch::tensor({{-1.0f, -2.0f}})});
  ASSERT_TRUE(lb.ok()) << lb.status();
  absl::StatusOr<LogprobsReply> l2 = DecodeLogprobsReply(*lb);
  ASSERT_TRUE(l2.ok()) << l2.status();
  EXPECT_EQ(l2->compute_s, 0.2);
  EXPECT_TRUE(torch::equal(l2->ref, torch::tensor({{-1.0f, -2.0f}})));
}

TEST(RoleProtocolTest, MalformedInputIsRefusedNamingWhatIsWrong) {
  absl::StatusOr<WsRequest> no_prefix = DecodeWsRequest(R"({"engines": 2})");
  EXPECT_TRUE(absl::IsInvalidArgument(no_prefix.status())) << no_prefix.status();
  EXPECT_NE(no_prefix.status().message().find("prefix"), absl::string_view::npos) << no_prefix.status();
  absl::StatusOr<SyncWeightsRequest> bad_engines = DecodeSyncWeightsRequest(R"({"engines": 3})");
  EXPECT_TRUE(absl::IsInvalidArgument(bad_engines.status())) << bad_engines.status();
  EXPECT_NE(bad_engines.status().message().find("engines"), absl::string_view::npos) << bad_engines.status();
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeSyncWeightsRequest("not json").status()));
  absl::StatusOr<LoadShardRequest> bad_rank =
      DecodeLoadShardRequest(PackParts({R"({"version": 1, "rank": 2, "world": 2})", ""}));
  EXPECT_TRUE(absl::IsInvalidArgument(bad_rank.status())) << bad_rank.status();
  EXPECT_NE(bad_rank.status().message().find("load_shard"), absl::string_view::npos) << bad_rank.status();
  absl::StatusOr<ScoreReply> short_reply = DecodeScoreReply(R"({"rewards": [1.0]})");
  EXPECT_TRUE(absl::IsInternal(short_reply.status())) << short_reply.status();
  EXPECT_TRUE(absl::IsInternal(DecodeNumber("seven", "engine 0 rank 0: version").status()));
  absl::StatusOr<int64_t> n = DecodeNumber("7", "version");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 7);
}

TEST(RoleProtocolTest, EngineRecoveryIsDecidedOnTheCodeAlone) {
  EXPECT_TRUE(EngineStub::Recoverable(absl::UnavailableError("actor restarting")));
  EXPECT_TRUE(EngineStub::Recoverable(absl::DeadlineExceededError("x")));
  EXPECT_TRUE(EngineStub::Recoverable(absl::FailedPreconditionError("any words at all")));
  EXPECT_FALSE(
      EngineStub::Recoverable(absl::InvalidArgumentError("generate: want tensors tokens and valid")));
  EXPECT_FALSE(EngineStub::Recoverable(absl::InternalError("state EMPTY")));
}

}  // namespace
}  // namespace skyrl::rl::role
