#include "runtime/common/ids.h"

#include <gtest/gtest.h>

#include <unordered_set>

#include "absl/container/flat_hash_set.h"
#include "runtime/common/actor_env.h"

namespace skyrl {
namespace {

TEST(IdTest, RandomIdsAreUniqueAndRoundTrip) {
  absl::flat_hash_set<ActorId> seen;
  for (int i = 0; i < 10000; ++i) {
    ActorId id = ActorId::Random();
    ASSERT_FALSE(id.IsNil());
    ASSERT_TRUE(seen.insert(id).second);
    auto parsed = ActorId::Parse(id.ToString());
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, id);
  }
  std::unordered_set<NodeId> std_set{NodeId::Random(), NodeId::Random()};
  EXPECT_EQ(std_set.size(), 2u);
}

TEST(IdTest, PrintsWithItsPrefix) {
  EXPECT_TRUE(NodeId::Random().ToString().starts_with("node-"));
  EXPECT_TRUE(PlacementGroupId::Random().ToString().starts_with("pg-"));
  EXPECT_TRUE(JobId::Random().ToString().starts_with("job-"));
  EXPECT_EQ(NodeId().ToString(), "node-000000000000000000000000");
}

TEST(IdTest, RejectsWhatIsNotAnIdOfItsKind) {
  std::string actor = ActorId::Random().ToString();
  auto wrong_kind = NodeId::Parse(actor);
  EXPECT_TRUE(absl::IsInvalidArgument(wrong_kind.status()));
  EXPECT_NE(wrong_kind.status().message().find("node id"), std::string::npos);
  EXPECT_FALSE(NodeId::Parse("").ok());
  EXPECT_FALSE(NodeId::Parse("node-").ok());
  EXPECT_FALSE(NodeId::Parse("node-00000000000000000000000G").ok());
  EXPECT_FALSE(NodeId::Parse("node-ABCDEF000000000000000000").ok());  // uppercase
  EXPECT_FALSE(NodeId::Parse("node_000000000000000000000000").ok());
  EXPECT_FALSE(NodeId::Parse(std::string(10000, 'a')).ok());
}

TEST(NameTest, ValidatesUserNames) {
  EXPECT_TRUE(ValidateName("name", "trainer-0.v2_a").ok());
  EXPECT_FALSE(ValidateName("name", "").ok());
  EXPECT_FALSE(ValidateName("name", "-x").ok());
  EXPECT_FALSE(ValidateName("name", "a b").ok());
  EXPECT_FALSE(ValidateName("name", std::string(129, 'a')).ok());
  EXPECT_NE(ValidateName("actor name", "a/b").message().find("actor name"), std::string::npos);
}

// Only what the worker sets is reserved; frameworks' own SKYRL_* settings and the device
// variables pass through to the actor.
TEST(ActorEnvTest, OnlyTheVariablesTheWorkerSetsAreRefusedEachByName) {
  for (std::string_view name : actor_env::kReserved) {
    absl::Status s = ValidateActorEnvVar("spec.env", absl::string_view(name.data(), name.size()), "x");
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << name;
    EXPECT_NE(s.message().find(std::string(name) + " is set by the worker"), std::string::npos) << s;
  }
  for (const char* name :
       {"SKYRL_WORKER_NCCL_TIMEOUT_IN_S", "SKYRL_DUMP_INFRA_LOG_TO_STDOUT", "CUDA_VISIBLE_DEVICES",
        "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES", "SKYRL_CALL_TELEMETRY"})
    EXPECT_TRUE(ValidateActorEnvVar("spec.env", name, "1").ok()) << name;
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateActorEnvVar("spec.env", "1BAD", "x")));
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateActorEnvVar("spec.env", "OK", std::string(1, '\0'))));
}

}  // namespace
}  // namespace skyrl
