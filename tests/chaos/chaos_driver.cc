// skyrl-chaos-driver: the client side of the chaos workload (tests/chaos/chaos_test.cc,
// scripts/soak). It creates echo actors that restart forever, then calls them from several
// threads with numbered arguments until told to stop (SIGTERM, or --seconds), retrying every
// failed call until it succeeds or its retry budget runs out, while a harness kills and
// freezes the cluster's processes around it.
//
// Stdout, one line a second: "progress calls=N failed=F" (the harness's watchdog reads it),
// then at the end one "chaos ..." summary line with every counter, and on a lost or wrong
// call a line saying which. Exit 0 when no call was lost or answered wrong and every actor
// answers at the end; 1 otherwise; 2 on bad flags; 3 when the actors cannot be created.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <future>
#include <map>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "runtime/client/client.h"
#include "runtime/common/signals.h"

namespace {

struct Flags {
  std::string address, token;
  int actors = 8, threads = 4, window = 8;
  double seconds = 0;  // 0: until SIGTERM
  int interval_ms = 5, retry_ms = 100;
  double call_timeout_s = 10, retry_budget_s = 60, actor_cpu = 0.5;
};

struct Totals {
  std::atomic<int64_t> ok{0};               // calls answered right
  std::atomic<int64_t> failed{0};           // failed attempts (each retried)
  std::atomic<int64_t> retried_ok{0};       // calls that failed at least once, then succeeded
  std::atomic<int64_t> lost{0};             // calls still failing after the retry budget
  std::atomic<int64_t> wrong{0};            // answers that were not the argument
  std::atomic<int64_t> longest_call_ms{0};  // first attempt to the right answer, the longest
  absl::Mutex mu;
  std::map<std::string, int64_t> failures_by_code ABSL_GUARDED_BY(mu);
  std::map<std::string, std::string> example_by_code ABSL_GUARDED_BY(mu);
};

std::atomic<bool> g_stop{false};

void Note(Totals& t, const absl::Status& s) {
  t.failed.fetch_add(1);
  std::string code = absl::StatusCodeToString(s.code());
  absl::MutexLock lock(&t.mu);
  ++t.failures_by_code[code];
  t.example_by_code.try_emplace(code, std::string(s.message()).substr(0, 200));
}

void Max(std::atomic<int64_t>& into, int64_t v) {
  int64_t cur = into.load();
  while (v > cur && !into.compare_exchange_weak(cur, v)) {
  }
}

// Calls `actor` with `arg` until the answer comes back or the budget runs out; the first
// attempt's future is given.
void Settle(skyrl::Client& client, const skyrl::ActorHandle& actor, const std::string& arg, absl::Time sent,
            std::future<absl::StatusOr<std::string>> first, const Flags& f, Totals& t) {
  absl::StatusOr<std::string> r = first.get();
  absl::Time first_failure = absl::InfiniteFuture();
  const absl::Duration timeout = absl::Seconds(f.call_timeout_s);
  while (true) {
    if (r.ok()) {
      if (*r != arg) {
        t.wrong.fetch_add(1);
        std::printf("WRONG actor %s sent %s got %s\n", actor.actor_id.c_str(), arg.c_str(),
                    r->substr(0, 64).c_str());
        std::fflush(stdout);
      } else {
        t.ok.fetch_add(1);
      }
      if (first_failure != absl::InfiniteFuture()) t.retried_ok.fetch_add(1);
      // How long the actor was unavailable to this call: waiting (a frozen process) and
      // retrying (a dead one) alike.
      Max(t.longest_call_ms, absl::ToInt64Milliseconds(absl::Now() - sent));
      return;
    }
    Note(t, r.status());
    if (first_failure == absl::InfiniteFuture()) first_failure = absl::Now();
    if (absl::Now() - first_failure > absl::Seconds(f.retry_budget_s)) {
      t.lost.fetch_add(1);
      std::printf("LOST actor %s arg %s: %s\n", actor.actor_id.c_str(), arg.c_str(),
                  std::string(r.status().message()).c_str());
      std::fflush(stdout);
      return;
    }
    absl::SleepFor(absl::Milliseconds(f.retry_ms));
    r = client.Call(actor, "echo", arg, timeout);
  }
}

// Thread `index`: batches of `window` calls (1: one synchronous call at a time), each to the
// next actor in turn, `interval_ms` apart.
void Work(skyrl::Client& client, const std::vector<skyrl::ActorHandle>& actors, int index, int window,
          const Flags& f, Totals& t) {
  const absl::Duration timeout = absl::Seconds(f.call_timeout_s);
  uint64_t n = 0;
  while (!g_stop.load()) {
    std::vector<std::pair<size_t, std::string>> sent;
    std::vector<std::future<absl::StatusOr<std::string>>> futures;
    const absl::Time now = absl::Now();
    for (int k = 0; k < window; ++k, ++n) {
      size_t a = (index + n) % actors.size();
      std::string arg = absl::StrCat(index, ":", n);
      futures.push_back(client.CallAsync(actors[a], "echo", arg, timeout));
      sent.emplace_back(a, std::move(arg));
    }
    for (size_t k = 0; k < futures.size(); ++k)
      Settle(client, actors[sent[k].first], sent[k].second, now, std::move(futures[k]), f, t);
    absl::SleepFor(absl::Milliseconds(f.interval_ms));
  }
}

// Creates `f.actors` echo actors that restart forever into `actors`; false (after saying why)
// when one cannot be created.
bool CreateChaosActors(skyrl::Client& client, const Flags& f, std::vector<skyrl::ActorHandle>& actors) {
  for (int i = 0; i < f.actors; ++i) {
    skyrl::v1::ActorSpec spec = skyrl::ActorSpecFor("echo", {{"CPU", f.actor_cpu}});
    spec.set_name(absl::StrCat("chaos-", i));
    spec.set_max_restarts(-1);
    absl::StatusOr<skyrl::ActorHandle> a = client.CreateActor(spec);
    if (!a.ok()) {
      std::fprintf(stderr, "chaos-driver: create %s: %s\n", spec.name().c_str(),
                   std::string(a.status().message()).c_str());
      return false;
    }
    actors.push_back(*a);
  }
  return true;
}

// Runs the calling threads until SIGTERM or --seconds after `start`, printing progress.
void CallUntilStopped(skyrl::Client& client, const std::vector<skyrl::ActorHandle>& actors, const Flags& f,
                      Totals& t, absl::Time start) {
  std::vector<std::thread> threads;
  for (int i = 0; i < f.threads; ++i)
    threads.emplace_back(Work, std::ref(client), std::cref(actors), i, i % 2 == 1 ? f.window : 1,
                         std::cref(f), std::ref(t));
  // SIGTERM or --seconds ends the run; progress goes out once a second meanwhile.
  std::thread signals([] {
    skyrl::WaitForTerminationSignal();
    g_stop = true;
  });
  signals.detach();
  while (!g_stop.load()) {
    absl::SleepFor(absl::Seconds(1));
    if (f.seconds > 0 && absl::Now() - start >= absl::Seconds(f.seconds)) g_stop = true;
    std::printf("progress calls=%lld failed=%lld\n", (long long)t.ok.load(), (long long)t.failed.load());
    std::fflush(stdout);
  }
  for (std::thread& th : threads) th.join();
}

// Every actor answers at the end (each within the retry budget); returns how many did not.
int Unanswered(skyrl::Client& client, const std::vector<skyrl::ActorHandle>& actors, const Flags& f,
               Totals& t) {
  int unanswered = 0;
  for (const skyrl::ActorHandle& a : actors) {
    std::string arg = absl::StrCat("final:", a.actor_id);
    int64_t lost_before = t.lost.load();
    Settle(client, a, arg, absl::Now(), client.CallAsync(a, "echo", arg), f, t);
    unanswered += t.lost.load() != lost_before;
  }
  return unanswered;
}

void PrintSummary(Totals& t, int unanswered, absl::Time start) {
  std::string codes;
  {
    absl::MutexLock lock(&t.mu);
    for (const auto& [code, n] : t.failures_by_code) {
      absl::StrAppend(&codes, " failed_", code, "=", n);
      std::printf("failure %s e.g. %s\n", code.c_str(), t.example_by_code[code].c_str());
    }
  }
  std::printf(
      "chaos calls=%lld failed=%lld retried_ok=%lld lost=%lld wrong=%lld unanswered_at_end=%d "
      "longest_call_ms=%lld seconds=%.0f%s\n",
      (long long)t.ok.load(), (long long)t.failed.load(), (long long)t.retried_ok.load(),
      (long long)t.lost.load(), (long long)t.wrong.load(), unanswered, (long long)t.longest_call_ms.load(),
      absl::ToDoubleSeconds(absl::Now() - start), codes.c_str());
  std::fflush(stdout);
}

int Run(const Flags& f) {
  skyrl::BlockTerminationSignals();  // before any thread starts: they inherit the mask

  skyrl::ClientOptions options;
  options.call_timeout = absl::Seconds(f.call_timeout_s);
  options.restart_wait = absl::Seconds(f.retry_budget_s);
  options.keepalive_time = absl::Seconds(5);
  options.keepalive_timeout = absl::Seconds(2);
  auto client = skyrl::Client::Connect(f.address, f.token, options);
  if (!client.ok()) {
    std::fprintf(stderr, "chaos-driver: %s\n", std::string(client.status().message()).c_str());
    return 2;
  }
  std::vector<skyrl::ActorHandle> actors;
  if (!CreateChaosActors(**client, f, actors)) return 3;
  std::printf("actors ready %d\n", f.actors);
  std::fflush(stdout);

  Totals t;
  const absl::Time start = absl::Now();
  CallUntilStopped(**client, actors, f, t, start);
  const int unanswered = Unanswered(**client, actors, f, t);
  PrintSummary(t, unanswered, start);
  return t.lost.load() == 0 && t.wrong.load() == 0 && unanswered == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"skyrl-chaos-driver: calls echo actors through faults and checks every answer"};
  Flags f;
  app.add_option("--address", f.address, "head HOST:PORT")->required();
  app.add_option("--token", f.token, "cluster token")->required();
  app.add_option("--actors", f.actors, "echo actors to create")->check(CLI::Range(1, 1000));
  app.add_option("--threads", f.threads, "calling threads; odd ones keep --window calls in flight")
      ->check(CLI::Range(1, 256));
  app.add_option("--window", f.window, "calls in flight per asynchronous thread")->check(CLI::Range(1, 1000));
  app.add_option("--seconds", f.seconds, "stop after this long (0: at SIGTERM)")->check(CLI::Range(0.0, 1e6));
  app.add_option("--interval-ms", f.interval_ms, "pause between a thread's batches")
      ->check(CLI::Range(0, 10000));
  app.add_option("--retry-ms", f.retry_ms, "pause before retrying a failed call")
      ->check(CLI::Range(1, 10000));
  app.add_option("--call-timeout-s", f.call_timeout_s, "deadline of each call")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--retry-budget-s", f.retry_budget_s,
                 "a call still failing this long after its first failure is lost")
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--actor-cpu", f.actor_cpu, "CPU each actor asks for")->check(CLI::Range(0.0, 64.0));
  CLI11_PARSE(app, argc, argv);
  return Run(f);
}
