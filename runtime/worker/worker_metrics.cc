#include "runtime/worker/worker_metrics.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace skyrl::worker {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;

// CPU seconds (utime + stime) and resident bytes of `pid`; false when it is gone.
bool ReadProcess(const std::string& proc, pid_t pid, double* cpu_s, double* rss) {
  std::ifstream stat(proc + "/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  // The command may hold spaces and parentheses: fields start after the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(line.substr(close + 2));
  std::string f;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {  // field 3 is the state; 14 utime, 15 stime
    if (i == 14) utime = std::stod(f);
    if (i == 15) stime = std::stod(f);
  }
  std::ifstream statm(proc + "/" + std::to_string(pid) + "/statm");
  double size = 0, pages = 0;
  if (!(statm >> size >> pages)) return false;
  *cpu_s = (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  *rss = pages * static_cast<double>(sysconf(_SC_PAGESIZE));
  return true;
}

ClientMetric Value(double v, std::vector<ClientMetric::Label> labels = {}, bool counter = false) {
  ClientMetric m;
  m.label = std::move(labels);
  (counter ? m.counter.value : m.gauge.value) = v;
  return m;
}

}  // namespace

void WorkerMetrics::RecordExit(const v1::ActorExitInfo& e) {
  const char* cause = e.killed_by_request() ? "killed"
                      : e.signal() != 0     ? "signaled"
                      : e.exit_code() == 0  ? "exited"
                                            : "failed";
  absl::MutexLock lock(&mu_);
  exits_[cause] += 1;
}

std::vector<MetricFamily> WorkerMetrics::Collect() const {
  const std::vector<std::pair<std::string, pid_t>> running = running_();
  MetricFamily processes{"skyrl_worker_actor_processes",
                         "Actor processes running on this node",
                         prometheus::MetricType::Gauge,
                         {Value(static_cast<double>(running.size()))}};
  MetricFamily cpu{"skyrl_worker_actor_cpu_seconds_total",
                   "CPU time of each actor process (user + system)",
                   prometheus::MetricType::Counter,
                   {}};
  MetricFamily rss{"skyrl_worker_actor_resident_bytes",
                   "Resident memory of each actor process",
                   prometheus::MetricType::Gauge,
                   {}};
  for (const auto& [actor, pid] : running) {
    double cpu_s = 0, bytes = 0;
    if (!ReadProcess(proc_, pid, &cpu_s, &bytes)) continue;
    cpu.metric.push_back(Value(cpu_s, {{"actor", actor}}, /*counter=*/true));
    rss.metric.push_back(Value(bytes, {{"actor", actor}}));
  }
  MetricFamily exits{"skyrl_worker_actor_exits_total",
                     "Actor process exits since this worker started, by cause",
                     prometheus::MetricType::Counter,
                     {}};
  {
    absl::MutexLock lock(&mu_);
    for (const char* cause : {"exited", "failed", "signaled", "killed"}) {
      const auto it = exits_.find(cause);
      exits.metric.push_back(
          Value(it == exits_.end() ? 0 : it->second, {{"cause", cause}}, /*counter=*/true));
    }
  }
  MetricFamily gpus{"skyrl_worker_gpus",
                    "GPUs this node offers",
                    prometheus::MetricType::Gauge,
                    {Value(static_cast<double>(gpus_))}};
  return {processes, cpu, rss, exits, gpus};
}

}  // namespace skyrl::worker
