// The RL roles' methods (rl.proto through role_protocol.h): the tensors in the messages survive
// their encoding, requests are checked naming the method and field, and the driver's recovery
// is decided on codes.
#include "rl/job/role_protocol.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "rl/algo/checkpoint.h"
#include "rl/job/job_setup.h"
#include "rl/job/role_stubs.h"

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

TEST(RoleProtocolTest, TensorsInTheMessagesRoundTrip) {
  PromptBatch batch{torch::tensor({{5, 6}}, torch::kInt64), torch::tensor({{true, false}})};
  absl::StatusOr<pb::GenerateRequest> g = MakeGenerateRequest(42, batch);
  ASSERT_TRUE(g.ok()) << g.status();
  pb::GenerateRequest g2;
  ASSERT_TRUE(g2.ParseFromString(g->SerializeAsString()));
  EXPECT_EQ(g2.seed(), 42u);
  absl::StatusOr<PromptBatch> back = BatchOf(g2);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(torch::equal(back->tokens, batch.tokens));
  EXPECT_TRUE(torch::equal(back->valid, batch.valid));

  NamedTensors shard{{"w", torch::arange(6, torch::kFloat32).reshape({2, 3})}};
  absl::StatusOr<pb::LoadShardRequest> s = MakeLoadShardRequest(2, 1, 2, shard);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(CheckLoadShard(*s).ok());
  absl::StatusOr<NamedTensors> s2 = DecodeTensors(s->shard());
  ASSERT_TRUE(s2.ok()) << s2.status();
  ASSERT_EQ(s2->size(), 1u);
  EXPECT_EQ((*s2)[0].first, "w");
  EXPECT_TRUE(torch::equal((*s2)[0].second, shard[0].second));

  absl::StatusOr<pb::LogprobsReply> l = MakeLogprobsReply(0.2, torch::tensor({{-1.0f, -2.0f}}));
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->compute_s(), 0.2);
  absl::StatusOr<torch::Tensor> ref = RefOf(*l);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_TRUE(torch::equal(*ref, torch::tensor({{-1.0f, -2.0f}})));

  absl::StatusOr<std::string> rollout = EncodeRollout(SmallRollout());
  ASSERT_TRUE(rollout.ok()) << rollout.status();
  pb::ScoreRequest score = MakeScoreRequest({{"12", "21"}, {"34", "43"}}, *rollout);
  std::vector<Example> examples = ExamplesOf(score);
  ASSERT_EQ(examples.size(), 2u);
  EXPECT_EQ(examples[1].prompt, "34");
  EXPECT_EQ(examples[1].target, "43");
  absl::StatusOr<Rollout> r2 = DecodeRollout(score.rollout());
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(r2->prompt_len, 2);
  EXPECT_TRUE(torch::equal(r2->sequences, SmallRollout().sequences));

  Scored scored = ScoredOf(MakeScoreReply(Scored{{1.0f, 0.5f}, 0.75, 0.5, 3}, 0.01));
  EXPECT_EQ(scored.rewards, (std::vector<float>{1.0f, 0.5f}));
  EXPECT_EQ(scored.mean_reward, 0.75);
  EXPECT_EQ(scored.exact_fraction, 0.5);
  EXPECT_EQ(scored.response_tokens, 3);
}

TEST(RoleProtocolTest, RequestsAreCheckedNamingTheMethodAndField) {
  pb::WsRequest ws;
  ws.set_engines(2);
  absl::Status no_prefix = CheckWsSend(ws);
  EXPECT_TRUE(absl::IsInvalidArgument(no_prefix)) << no_prefix;
  EXPECT_NE(no_prefix.message().find("ws_send: prefix"), absl::string_view::npos) << no_prefix;
  ws.set_prefix("grpo/pg/0");
  EXPECT_TRUE(CheckWsSend(ws).ok());
  // Unset fields mean what they always meant.
  EXPECT_EQ(EngineTp(ws), 1);
  EXPECT_EQ(TrainerTp(ws), 1);
  EXPECT_EQ(Host(ws), "127.0.0.1");
  EXPECT_EQ(IoTimeoutS(ws), 20);
  ws.set_engine_tp(2);
  ws.set_rank(4);  // receivers are 0..3
  absl::Status rank = CheckWsReceive(ws);
  EXPECT_TRUE(absl::IsInvalidArgument(rank)) << rank;
  EXPECT_NE(rank.message().find("ws_receive: rank: 4 (receiver ranks are 0..3)"), absl::string_view::npos)
      << rank;
  ws.set_rank(3);
  EXPECT_TRUE(CheckWsReceive(ws).ok());
  ws.set_version(-1);
  EXPECT_TRUE(absl::IsInvalidArgument(CheckWsReceive(ws)));
  ws.set_version(0);
  ws.set_engines(0);
  EXPECT_NE(CheckWsReceive(ws).message().find("engines: 0"), absl::string_view::npos);

  pb::LoadShardRequest shard;
  shard.set_version(1);
  shard.set_rank(2);
  shard.set_world(2);
  absl::Status bad_rank = CheckLoadShard(shard);
  EXPECT_TRUE(absl::IsInvalidArgument(bad_rank)) << bad_rank;
  EXPECT_NE(bad_rank.message().find("load_shard: rank: 2 of world 2"), absl::string_view::npos) << bad_rank;

  pb::GenerateRequest one_tensor;
  absl::StatusOr<std::string> t = EncodeTensors({{"tokens", torch::tensor({{1}}, torch::kInt64)}});
  ASSERT_TRUE(t.ok());
  one_tensor.set_batch(*t);
  absl::StatusOr<PromptBatch> b = BatchOf(one_tensor);
  EXPECT_TRUE(absl::IsInvalidArgument(b.status())) << b.status();
  EXPECT_NE(b.status().message().find("generate: batch"), absl::string_view::npos) << b.status();

  pb::LogprobsReply two;
  absl::StatusOr<std::string> t2 =
      EncodeTensors({{"a", torch::tensor({1.0f})}, {"b", torch::tensor({2.0f})}});
  ASSERT_TRUE(t2.ok());
  two.set_ref(*t2);
  EXPECT_TRUE(absl::IsInternal(RefOf(two).status()));
}

TEST(RoleProtocolTest, RoleArgsRoundTripAndBadOnesAreRefusedNamingTheField) {
  absl::StatusOr<RoleArgs> a = DecodeRoleArgs(EncodeRoleArgs({"trainer: {}", 1, 2, "10.0.0.1:7000", 0}));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->config_yaml, "trainer: {}");
  EXPECT_EQ(a->rank, 1);
  EXPECT_EQ(a->world, 2);
  EXPECT_EQ(a->master, "10.0.0.1:7000");
  absl::StatusOr<RoleArgs> no_master = DecodeRoleArgs(EncodeRoleArgs({"trainer: {}", 1, 2, "", 0}));
  EXPECT_TRUE(absl::IsInvalidArgument(no_master.status())) << no_master.status();
  EXPECT_NE(no_master.status().message().find("master"), absl::string_view::npos) << no_master.status();
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeRoleArgs(EncodeRoleArgs({"x", 2, 2, "h:1", 0})).status()));
  absl::StatusOr<RoleArgs> no_config = DecodeRoleArgs(EncodeRoleArgs({"", 0, 1, "", 0}));
  EXPECT_NE(no_config.status().message().find("config_yaml"), absl::string_view::npos) << no_config.status();
  absl::StatusOr<RoleArgs> garbage =
      DecodeRoleArgs(std::string("\x0a\x09"
                                 "short",
                                 7));
  EXPECT_TRUE(absl::IsInvalidArgument(garbage.status())) << garbage.status();
  EXPECT_NE(garbage.status().message().find("init args: not a skyrl.v1.rl.RoleArgs"), absl::string_view::npos)
      << garbage.status();
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
