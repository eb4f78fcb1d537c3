#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "rl/tasks/tasks.h"
#include "rl/tasks/tokenizer.h"

namespace skyrl::rl {
namespace {

TEST(Tokenizer, RoundTripsAndFramesPrompts) {
  auto ids = Tokenizer::EncodePrompt("12+9=");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->front(), Tokenizer::kBos);
  EXPECT_EQ(ids->back(), Tokenizer::kSep);
  EXPECT_EQ(Tokenizer::Decode(*ids), "<bos>12+9=<sep>");
  for (int id : *ids) EXPECT_LT(id, Tokenizer::kVocab);
  auto bad = Tokenizer::Encode("12a");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'a' at position 2"), absl::string_view::npos) << bad.status();
}

TEST(Tokenizer, ResponseStopsAtEos) {
  auto ids = *Tokenizer::Encode("407");
  ids.push_back(Tokenizer::kEos);
  ids.push_back(Tokenizer::kPad);
  Tokenizer::Answer a = Tokenizer::DecodeResponse(ids);
  EXPECT_EQ(a.text, "407");
  EXPECT_TRUE(a.terminated);
  a = Tokenizer::DecodeResponse({Tokenizer::kBos, 5});
  EXPECT_EQ(a.text, "?1");
  EXPECT_FALSE(a.terminated);
}

TEST(Tasks, EachTaskMakesVerifiableExamples) {
  std::mt19937_64 rng(7);
  TaskOptions o{2, 4};
  for (const std::string& name : TaskNames()) {
    auto task = FindTask(name);
    ASSERT_TRUE(task.ok()) << task.status();
    for (int i = 0; i < 50; ++i) {
      Example ex = (*task)->make(rng, o);
      ASSERT_TRUE(Tokenizer::Encode(ex.prompt).ok()) << name << ": " << ex.prompt;
      EXPECT_EQ((*task)->reward(ex, ex.target, true), 1.0) << name;
      EXPECT_LT((*task)->reward(ex, ex.target + "1", true), 1.0) << name;
      EXPECT_LT((*task)->reward(ex, ex.target, false), 1.0)
          << name << ": an unterminated answer is not full marks";
    }
  }
}

TEST(Tasks, TargetsFollowTheRules) {
  std::mt19937_64 rng(3);
  TaskOptions o{3, 5};
  for (int i = 0; i < 100; ++i) {
    Example c = (*FindTask("copy"))->make(rng, o);
    EXPECT_EQ(c.prompt, c.target);
    EXPECT_GE(c.prompt.size(), 3u);
    EXPECT_LE(c.prompt.size(), 5u);
    Example r = (*FindTask("reverse"))->make(rng, o);
    EXPECT_EQ(std::string(r.prompt.rbegin(), r.prompt.rend()), r.target);
    Example s = (*FindTask("sort"))->make(rng, o);
    EXPECT_TRUE(std::is_sorted(s.target.begin(), s.target.end()));
    EXPECT_TRUE(std::is_permutation(s.target.begin(), s.target.end(), s.prompt.begin()));
    Example a = (*FindTask("add"))->make(rng, o);
    auto plus = a.prompt.find('+');
    ASSERT_NE(plus, std::string::npos);
    EXPECT_EQ(std::stoll(a.prompt.substr(0, plus)) + std::stoll(a.prompt.substr(plus + 1)),
              std::stoll(a.target));
  }
}

TEST(Rewards, PositionalMatchGivesPartialCredit) {
  Example ex{"1234", "1234"};
  EXPECT_DOUBLE_EQ(PositionalMatchReward(ex, "1234", true), 1.0);
  EXPECT_DOUBLE_EQ(PositionalMatchReward(ex, "1299", true), 0.5);
  EXPECT_DOUBLE_EQ(PositionalMatchReward(ex, "12", true), 0.5);          // 2 of the longer 4
  EXPECT_DOUBLE_EQ(PositionalMatchReward(ex, "123456", true), 4.0 / 6);  // extra digits cost
  EXPECT_DOUBLE_EQ(PositionalMatchReward(ex, "1234", false), 0.5);       // never stopped
  EXPECT_DOUBLE_EQ(PositionalMatchReward(ex, "", true), 0.0);
  EXPECT_DOUBLE_EQ(ExactMatchReward(ex, "1234", true), 1.0);
  EXPECT_DOUBLE_EQ(ExactMatchReward(ex, "1235", true), 0.0);
  EXPECT_DOUBLE_EQ(ExactMatchReward(ex, "1234", false), 0.0);
}

TEST(Tasks, UnknownNamesAndBadOptionsAreErrors) {
  auto t = FindTask("multiply");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("copy"), absl::string_view::npos) << "lists the known tasks";
  EXPECT_NE(ValidateTaskOptions({0, 3}).message().find("min_digits"), absl::string_view::npos);
  EXPECT_NE(ValidateTaskOptions({4, 3}).message().find("max_digits"), absl::string_view::npos);
  EXPECT_TRUE(ValidateTaskOptions({1, 12}).ok());
}

}  // namespace
}  // namespace skyrl::rl
