#include "rl/tasks/tasks.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace skyrl::rl {
namespace {

std::string Digits(std::mt19937_64& rng, const TaskOptions& o) {
  std::uniform_int_distribution<int> len(o.min_digits, o.max_digits), digit(0, 9);
  std::string s(len(rng), '0');
  for (char& c : s) c = static_cast<char>('0' + digit(rng));
  return s;
}

Example Copy(std::mt19937_64& rng, const TaskOptions& o) {
  std::string s = Digits(rng, o);
  return {s, s};
}

Example Reverse(std::mt19937_64& rng, const TaskOptions& o) {
  std::string s = Digits(rng, o);
  return {s, std::string(s.rbegin(), s.rend())};
}

Example Sort(std::mt19937_64& rng, const TaskOptions& o) {
  std::string s = Digits(rng, o);
  std::string t = s;
  std::sort(t.begin(), t.end());
  return {s, t};
}

// Operands without leading zeros, so the prompt reads as arithmetic.
Example Add(std::mt19937_64& rng, const TaskOptions& o) {
  auto number = [&] {
    std::uniform_int_distribution<int> len(o.min_digits, o.max_digits);
    int n = len(rng);
    int64_t lo = 1;
    for (int i = 1; i < n; ++i) lo *= 10;
    std::uniform_int_distribution<int64_t> v(n == 1 ? 0 : lo, lo * 10 - 1);
    return v(rng);
  };
  int64_t a = number(), b = number();
  return {absl::StrCat(a, "+", b), absl::StrCat(a + b)};
}

// The registry: one line per task.
constexpr Task kTasks[] = {
    {"copy", "repeat the digit string", Copy, PositionalMatchReward},
    {"reverse", "the digit string reversed", Reverse, PositionalMatchReward},
    {"sort", "the digits in ascending order", Sort, PositionalMatchReward},
    {"add", "the sum of two numbers", Add, ExactMatchReward},
};

}  // namespace

double PositionalMatchReward(const Example& ex, absl::string_view answer, bool terminated) {
  if (terminated && answer == ex.target) return 1.0;
  const size_t longer = std::max(answer.size(), ex.target.size());
  if (longer == 0) return 0.0;
  size_t same = 0;
  for (size_t i = 0; i < std::min(answer.size(), ex.target.size()); ++i) same += answer[i] == ex.target[i];
  double r = static_cast<double>(same) / static_cast<double>(longer);
  return terminated ? r : r / 2;
}

double ExactMatchReward(const Example& ex, absl::string_view answer, bool terminated) {
  return terminated && answer == ex.target ? 1.0 : 0.0;
}

absl::StatusOr<const Task*> FindTask(absl::string_view name) {
  for (const Task& t : kTasks) {
    if (name == t.name) return &t;
  }
  return absl::NotFoundError(
      absl::StrCat("task \"", name, "\" is not registered; known tasks: ", absl::StrJoin(TaskNames(), ", ")));
}

std::vector<std::string> TaskNames() {
  std::vector<std::string> out;
  for (const Task& t : kTasks) out.push_back(t.name);
  return out;
}

absl::Status ValidateTaskOptions(const TaskOptions& o) {
  if (o.min_digits < 1 || o.min_digits > 12) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment.min_digits: must be in [1, 12], got ", o.min_digits));
  }
  if (o.max_digits < o.min_digits || o.max_digits > 12) {
    return absl::InvalidArgumentError(absl::StrCat(
        "environment.max_digits: must be in [min_digits=", o.min_digits, ", 12], got ", o.max_digits));
  }
  return absl::OkStatus();
}

}  // namespace skyrl::rl
