// skyrl-worker: one per node. Parses flags into WorkerOptions and runs the worker
// (runtime/worker/worker.h).
#include "CLI/CLI.hpp"
#include "absl/time/clock.h"
#include "runtime/common/logging.h"
#include "runtime/common/signals.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/server.h"
#include "runtime/worker/worker.h"

int main(int argc, char** argv) {
  skyrl::BlockTerminationSignals();
  skyrl::worker::WorkerOptions o;
  CLI::App app{"skyrl-worker: runs actors on this node for a SkyRL Runtime cluster"};
  std::string token_file, log_level = "info";
  double head_retry_window_s = 300;
  skyrl::rpc::TlsFiles tls;
  app.add_option("--head", o.head, "head address HOST:PORT")->required();
  app.add_option("--resources", o.resources, "override detected resources, e.g. CPU=8,GPU=4,custom=2");
  app.add_option("--labels", o.labels, "node labels, e.g. accelerator=H100,pool=train");
  app.add_option("--gpu-ids", o.gpu_ids,
                 "declare device ids instead of detecting them, e.g. 0,1,2,3 (containers whose devices "
                 "CUDA cannot list; CPU-only clusters that simulate GPU placement)");
  app.add_option("--node-ip", o.node_ip, "address other nodes reach this one at");
  app.add_option("--head-retry-window-s", head_retry_window_s,
                 "exit after the head is unreachable this long; 0: never. This node's actors stop earlier, "
                 "once the head's keep limit has passed (skyrl-head --headless-keep-ms)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--metrics-port", o.metrics_port,
                 "serve Prometheus metrics on http://<bind>:<port>/metrics (0: a free port; default: off)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--port", o.port, "port of this worker's service (0: any free port)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--bind", o.bind, "address this worker and its actors listen on");
  app.add_option("--log-dir", o.log_dir, "actor logs (default $TMPDIR/skyrl-worker-<pid>)");
  app.add_option("--actor-host", o.actor_host,
                 "actor host binary (default: skyrl-actor-host beside this one)");
  app.add_option("--python", o.python,
                 "Python interpreter for Python actors and tasks, e.g. a virtualenv's bin/python3 "
                 "(default: the one skyrl_runtime was built for)")
      ->check(CLI::ExistingFile);
  app.add_option("--python-fork-server", o.python_fork_server,
                 "fork Python actors and task executors from a prestarted interpreter that has imported "
                 "skyrl_runtime once (milliseconds a start); false: a fresh interpreter each")
      ->default_val(true);
  app.add_option("--token-file", token_file, "cluster token file (else $SKYRL_TOKEN, else ~/.skyrl/token)");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|critical|off");
  skyrl::rpc::AddTlsFlags(app, tls);
  CLI11_PARSE(app, argc, argv);
  auto fail = [](const absl::Status& s) {
    fprintf(stderr, "skyrl-worker: %s\n", std::string(s.message()).c_str());
    return 2;
  };
  if (absl::Status s = skyrl::rpc::ConfigureTls(tls); !s.ok()) return fail(s);
  if (absl::Status s = skyrl::InitLogging("worker", log_level); !s.ok()) return fail(s);
  o.head_retry_window = absl::Seconds(head_retry_window_s);
  // Bad flags fail before the wait for a token below.
  absl::StatusOr<skyrl::worker::NodeDescription> node = skyrl::worker::DescribeNode(o);
  if (!node.ok()) return fail(node.status());
  // A worker started beside a head that is still starting waits briefly for the head to
  // write ~/.skyrl/token, as it waits for the head itself.
  absl::StatusOr<std::string> token = skyrl::rpc::LoadToken(token_file, false);
  for (absl::Time deadline = absl::Now() + absl::Seconds(10);
       absl::IsNotFound(token.status()) && token_file.empty() && absl::Now() < deadline;) {
    absl::SleepFor(absl::Milliseconds(50));
    token = skyrl::rpc::LoadToken(token_file, false);
  }
  if (!token.ok()) return fail(token.status());
  o.token = *token;
  return skyrl::worker::RunWorker(o, *node);
}
