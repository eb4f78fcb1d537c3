// Toy tasks with rule-based verifiable rewards, chosen by name. A task makes examples
// (prompt text and the reference answer) and scores an answer against the reference.
//
// To add a task: write its example function (and a reward function if none of the existing
// ones fits) in tasks.cc and add one line to the registry table there.
//
// Stateless; safe for concurrent use (randomness comes from the caller's generator).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skyrl::rl {

struct TaskOptions {
  int min_digits = 3;  // length of the digit string (per operand for arithmetic)
  int max_digits = 3;
};

struct Example {
  std::string prompt;  // e.g. "3141"; the policy sees BOS prompt SEP
  std::string target;  // the reference answer, e.g. "1413"
};

using ExampleFn = Example (*)(std::mt19937_64& rng, const TaskOptions& opts);
// `answer` is the response text before EOS; `terminated` whether EOS was produced.
using RewardFn = double (*)(const Example& ex, absl::string_view answer, bool terminated);

struct Task {
  const char* name;
  const char* description;
  ExampleFn make;
  RewardFn reward;
};

// NotFound naming the task and listing the known ones.
absl::StatusOr<const Task*> FindTask(absl::string_view name);
std::vector<std::string> TaskNames();
// InvalidArgument naming the field: 1 <= min_digits <= max_digits <= 12.
absl::Status ValidateTaskOptions(const TaskOptions& opts);

// The reward functions, exposed for tests and for new tasks to reuse.
// 1.0 for the exact answer followed by EOS. Otherwise partial credit: the fraction of
// positions where answer and target agree, over the longer of the two, halved when the
// response never ended (ran out of tokens). In [0, 1].
double PositionalMatchReward(const Example& ex, absl::string_view answer, bool terminated);
// 1.0 for the exact answer followed by EOS, else 0.
double ExactMatchReward(const Example& ex, absl::string_view answer, bool terminated);

}  // namespace skyrl::rl
