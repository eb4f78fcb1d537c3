// skyrl-head: the cluster's metadata daemon. Parses flags into HeadOptions and runs the head
// (runtime/head/head.h).
#include <cstdlib>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "runtime/common/logging.h"
#include "runtime/common/signals.h"
#include "runtime/head/head.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/server.h"

int main(int argc, char** argv) {
  skyrl::BlockTerminationSignals();
  // Debian's abseil is built without NDEBUG, so every Mutex lock would run the deadlock
  // detector's lock-graph bookkeeping (a few % of the head's CPU under load). The tests keep
  // it on, which is where a lock-order bug should show.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  skyrl::head::HeadOptions o;
  CLI::App app{"skyrl-head: the SkyRL Runtime head daemon"};
  std::string token_file, log_level = "info";
  double store_retry_window_s = 5;
  int heartbeat_ms = 1000;
  int64_t keep_terminal = skyrl::head::kDefaultKeepTerminal;
  skyrl::rpc::TlsFiles tls;
  app.add_option("--port", o.port, "gRPC port")->check(CLI::Range(1, 65535));
  app.add_option("--metrics-port", o.metrics_port,
                 "serve Prometheus metrics on http://<bind>:<port>/metrics (0: a free port; default: off)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--dashboard-port", o.dashboard_port,
                 "serve the dashboard on http://<bind>:<port>/, behind the cluster token (0: a free port; "
                 "default: off)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--bind", o.bind, "address to listen on (127.0.0.1 unless told otherwise)");
  app.add_option("--store", o.store, "metadata store: memory | redis://[:password@]host:port[/db]");
  app.add_option("--store-retry-window-s", store_retry_window_s,
                 "with Redis: how long a write waits for an unreachable Redis before the head goes on from "
                 "memory, queueing writes until Redis is back")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--namespace", o.ns, "cluster name: the store keeps each cluster's tables apart");
  app.add_option("--token-file", token_file,
                 "cluster token file (else $SKYRL_TOKEN, else ~/.skyrl/token, created if missing)");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|critical|off");
  app.add_option("--jobs-dir", o.jobs_dir,
                 "job drivers' logs and working directories, and audit.log (default ~/.skyrl/jobs)");
  app.add_option(
         "--heartbeat-period-ms", heartbeat_ms,
         "worker heartbeat period; a node silent for period x misses (T, 5 s by default) is declared "
         "dead, and its actors restart elsewhere once its death is confirmed: at once when a worker on "
         "its machine finds its process gone, at the latest T + --headless-keep-ms (35 s by default) "
         "after it was last heard")
      ->check(CLI::Range(10, 600000));
  app.add_option("--heartbeat-misses", o.heartbeat_misses, "missed heartbeats before a node is dead")
      ->check(CLI::Range(1, 1000));
  app.add_option(
         "--heartbeats-per-s", o.heartbeats_per_s,
         "heartbeats a second the head takes from all nodes together: with more nodes than the "
         "period allows, workers are asked for a longer period (whole periods: 4 s at 10,000 nodes), and "
         "T grows with it; 0: the period never grows")
      ->check(CLI::Range(0, 10000000));
  int64_t headless_keep_ms = 30000;
  app.add_option("--headless-keep-ms", headless_keep_ms,
                 "how long a worker that cannot reach the head may keep its actors on its peers' word, after "
                 "its last answer; a silent node's actors restart elsewhere at the latest this plus "
                 "period x misses after it was last heard. A head away longer than this plus 0.9 x period x "
                 "misses stops every actor (those with restarts left restart when it is back). 0: no limit")
      ->check(CLI::Range(int64_t{0}, int64_t{24} * 3600 * 1000));
  app.add_option("--keep-terminal", keep_terminal,
                 "DEAD actors and REMOVED placement groups kept per table (memory and store), the oldest "
                 "evicted first; 0 keeps none");
  skyrl::rpc::AddTlsFlags(app, tls);
  CLI11_PARSE(app, argc, argv);
  auto fail = [](const absl::Status& s) {
    fprintf(stderr, "skyrl-head: %s\n", std::string(s.message()).c_str());
    return 2;
  };
  absl::StatusOr<skyrl::head::RetentionOptions> retention = skyrl::head::RetentionFromFlag(keep_terminal);
  if (!retention.ok()) return fail(retention.status());
  if (absl::Status s = skyrl::rpc::ConfigureTls(tls); !s.ok()) return fail(s);
  if (absl::Status s = skyrl::InitLogging("head", log_level); !s.ok()) return fail(s);
  absl::StatusOr<std::string> token = skyrl::rpc::LoadToken(token_file, /*create_if_missing=*/true);
  if (!token.ok()) {
    spdlog::critical("{}", token.status().message());
    return 2;
  }
  o.token = *token;
  o.retention = *retention;
  o.store_retry_window = absl::Seconds(store_retry_window_s);
  o.heartbeat_period = absl::Milliseconds(heartbeat_ms);
  o.headless_keep = absl::Milliseconds(headless_keep_ms);
  if (o.jobs_dir.empty()) {
    const char* home = std::getenv("HOME");
    o.jobs_dir = absl::StrCat(home && *home ? home : "/tmp", "/.skyrl/jobs");
  }
  return skyrl::head::RunHead(o);
}
