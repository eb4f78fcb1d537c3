// Built-in test actors, so tests, benchmarks and the CLI can exercise the runtime without
// user code: echo, counter, sleep and crash (on demand).
#include <signal.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/actor/actor.h"

namespace skyrl::builtin {

class EchoActor : public Actor {
 public:
  static absl::StatusOr<std::unique_ptr<EchoActor>> Create(absl::string_view) {
    return std::make_unique<EchoActor>();
  }
  static void RegisterMethods(MethodTable<EchoActor>& t) {
    t.Add("echo", &EchoActor::Echo);
    t.Add("log", &EchoActor::Log);
    t.Add("history", &EchoActor::History);
    t.Add("getenv", &EchoActor::GetEnv);
    t.Add("pid", &EchoActor::Pid);
    t.Add("fill", &EchoActor::Fill);
  }
  // N bytes of 'x' (a result larger than its args, for tests of result parts and limits).
  absl::StatusOr<std::string> Fill(absl::string_view n) {
    uint64_t bytes = 0;
    if (!absl::SimpleAtoi(n, &bytes) || bytes > (uint64_t{1} << 30))
      return absl::InvalidArgumentError("fill: give a byte count of at most 1 GiB");
    return std::string(bytes, 'x');
  }
  // This process's id: which incarnation of the actor answered (partition tests).
  absl::StatusOr<std::string> Pid(absl::string_view) { return std::to_string(getpid()); }
  absl::StatusOr<std::string> Echo(absl::string_view args) { return std::string(args); }
  // Order-sensitive state, for tests of call ordering: appends args to a log.
  absl::StatusOr<std::string> Log(absl::string_view args) {
    absl::StrAppend(&log_, log_.empty() ? "" : ",", args);
    return std::string(args);
  }
  absl::StatusOr<std::string> History(absl::string_view) { return log_; }
  // The value of an environment variable ("" when unset): tests check CUDA_VISIBLE_DEVICES.
  absl::StatusOr<std::string> GetEnv(absl::string_view name) {
    const char* v = std::getenv(std::string(name).c_str());
    return std::string(v ? v : "");
  }

 private:
  std::string log_;
};
SKYRL_REGISTER_ACTOR(EchoActor, "echo");

// State that a restart loses: the count starts again from the constructor's argument.
class CounterActor : public Actor {
 public:
  explicit CounterActor(int64_t start) : total_(start) {}
  static absl::StatusOr<std::unique_ptr<CounterActor>> Create(absl::string_view init) {
    int64_t start = 0;
    if (!init.empty() && !absl::SimpleAtoi(init, &start))
      return absl::InvalidArgumentError(absl::StrCat("counter: init args \"", init, "\" is not an integer"));
    return std::make_unique<CounterActor>(start);
  }
  static void RegisterMethods(MethodTable<CounterActor>& t) {
    t.Add("add", &CounterActor::Add);
    t.Add("get", &CounterActor::GetTotal);
  }
  absl::StatusOr<std::string> Add(absl::string_view args) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(args, &n))
      return absl::InvalidArgumentError(absl::StrCat("add: \"", args, "\" is not an integer"));
    total_ += n;
    return absl::StrCat(total_);
  }
  absl::StatusOr<std::string> GetTotal(absl::string_view) { return absl::StrCat(total_); }

 private:
  int64_t total_;
};
SKYRL_REGISTER_ACTOR(CounterActor, "counter");

class SleepActor : public Actor {
 public:
  static absl::StatusOr<std::unique_ptr<SleepActor>> Create(absl::string_view) {
    return std::make_unique<SleepActor>();
  }
  static void RegisterMethods(MethodTable<SleepActor>& t) {
    t.Add("sleep", &SleepActor::Sleep);
    t.Add("peak", &SleepActor::Peak);
  }
  // Sleeps the given milliseconds (at most 600000), then returns them.
  absl::StatusOr<std::string> Sleep(absl::string_view args) {
    int ms = 0;
    if (!absl::SimpleAtoi(args, &ms) || ms < 0 || ms > 600000)
      return absl::InvalidArgumentError("sleep: args must be milliseconds in 0-600000");
    int now = ++running_;
    for (int seen = peak_.load(); now > seen && !peak_.compare_exchange_weak(seen, now);) {
    }
    absl::SleepFor(absl::Milliseconds(ms));
    --running_;
    return std::string(args);
  }
  // The most sleeps that ever ran at once: shows whether max_concurrency held.
  absl::StatusOr<std::string> Peak(absl::string_view) { return absl::StrCat(peak_.load()); }

 private:
  std::atomic<int> running_{0}, peak_{0};
};
SKYRL_REGISTER_ACTOR(SleepActor, "sleep");

// init args "fail" make the constructor fail; method "crash" with "exit N" or "signal N" ends
// the process that way.
class CrashActor : public Actor {
 public:
  static absl::StatusOr<std::unique_ptr<CrashActor>> Create(absl::string_view init) {
    if (init == "fail") return absl::FailedPreconditionError("crash actor told to fail in its constructor");
    return std::make_unique<CrashActor>();
  }
  static void RegisterMethods(MethodTable<CrashActor>& t) {
    t.Add("crash", &CrashActor::Crash);
    t.Add("ping", &CrashActor::Ping);
  }
  absl::StatusOr<std::string> Ping(absl::string_view) { return std::string("pong"); }
  absl::StatusOr<std::string> Crash(absl::string_view args) {
    int n = 0;
    if (absl::ConsumePrefix(&args, "exit ") && absl::SimpleAtoi(args, &n)) {
      std::fprintf(stderr, "crash actor: exiting with code %d on request\n", n);
      std::fflush(stderr);
      _exit(n);
    }
    if (absl::ConsumePrefix(&args, "signal ") && absl::SimpleAtoi(args, &n)) {
      std::fprintf(stderr, "crash actor: raising signal %d on request\n", n);
      std::fflush(stderr);
      signal(n, SIG_DFL);
      raise(n);
    }
    return absl::InvalidArgumentError("crash: args must be \"exit N\" or \"signal N\"");
  }
};
SKYRL_REGISTER_ACTOR(CrashActor, "crash");

}  // namespace skyrl::builtin
