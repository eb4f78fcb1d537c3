// skyrl-call-probe: calls one actor's method over and over and prints each outcome with the
// time, so a partition test can tell which incarnation answered when:
//   <unix ms> ok <result>
//   <unix ms> err <status code> <message>
// Runs until SIGTERM. Usage: skyrl-call-probe --address HEAD --token T --actor ID [--method pid]
#include <cstdio>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/time/clock.h"
#include "runtime/client/client.h"
#include "runtime/common/signals.h"

int main(int argc, char** argv) {
  CLI::App app{"skyrl-call-probe: calls an actor repeatedly and prints each outcome with its time"};
  std::string address, token, actor, method = "pid";
  int interval_ms = 20;
  double timeout_s = 1;
  app.add_option("--address", address, "head HOST:PORT")->required();
  app.add_option("--token", token, "cluster token")->required();
  app.add_option("--actor", actor, "actor id")->required();
  app.add_option("--method", method, "method to call");
  app.add_option("--interval-ms", interval_ms, "pause between calls")->check(CLI::Range(0, 60000));
  app.add_option("--timeout-s", timeout_s, "deadline of each call")->check(CLI::Range(0.01, 600.0));
  CLI11_PARSE(app, argc, argv);
  skyrl::BlockTerminationSignals();
  skyrl::ClientOptions options;
  options.call_timeout = absl::Seconds(timeout_s);
  options.restart_wait = absl::Seconds(timeout_s);
  options.keepalive_time = absl::Seconds(5);
  options.keepalive_timeout = absl::Milliseconds(500);
  auto client = skyrl::Client::Connect(address, token, options);
  if (!client.ok()) {
    std::fprintf(stderr, "call-probe: %s\n", std::string(client.status().message()).c_str());
    return 2;
  }
  std::atomic<bool> stop{false};
  std::thread signals([&] {
    skyrl::WaitForTerminationSignal();
    stop = true;
  });
  signals.detach();
  while (!stop.load()) {
    absl::StatusOr<std::string> r = (*client)->Call({actor}, method, "");
    long long now = (long long)absl::ToUnixMillis(absl::Now());
    if (r.ok()) {
      std::printf("%lld ok %s\n", now, r->c_str());
    } else {
      std::printf("%lld err %d %s\n", now, int(r.status().code()),
                  std::string(r.status().message()).substr(0, 160).c_str());
    }
    std::fflush(stdout);
    absl::SleepFor(absl::Milliseconds(interval_ms));
  }
  return 0;
}
