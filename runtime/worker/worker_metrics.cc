#include "runtime/worker/worker_metrics.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "runtime/common/parallel.h"
#include "runtime/metrics/families.h"

namespace skyrl::worker {
namespace {

constexpr size_t kMaxTelemetryThreads = 16;  // hosts asked at once during a scrape

using metrics::Sample;
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

const std::vector<double>& StartBounds() {
  static const std::vector<double> b = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
  return b;
}

std::string CodeName(int32_t code) {
  std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? std::to_string(code) : name;
}

}  // namespace

void WorkerMetrics::RecordStart(absl::Duration launch_to_serving) {
  const double s = absl::ToDoubleSeconds(launch_to_serving);
  const auto& bounds = StartBounds();
  absl::MutexLock lock(&mu_);
  if (start_buckets_.empty()) start_buckets_.assign(bounds.size() + 1, 0);
  ++start_buckets_[std::lower_bound(bounds.begin(), bounds.end(), s) - bounds.begin()];
  start_sum_s_ += s;
}

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
                         {Sample(static_cast<double>(running.size()))}};
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
    cpu.metric.push_back(Sample(cpu_s, {{"actor", actor}}, /*counter=*/true));
    rss.metric.push_back(Sample(bytes, {{"actor", actor}}));
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
          Sample(it == exits_.end() ? 0 : it->second, {{"cause", cause}}, /*counter=*/true));
    }
  }
  MetricFamily gpus{"skyrl_worker_gpus",
                    "GPUs this node offers",
                    prometheus::MetricType::Gauge,
                    {Sample(static_cast<double>(gpus_))}};
  MetricFamily gpus_used{"skyrl_worker_gpus_in_use",
                         "GPUs of this node held by running actors",
                         prometheus::MetricType::Gauge,
                         {Sample(hosts_.gpus_in_use ? hosts_.gpus_in_use() : 0)}};
  MetricFamily starts{"skyrl_worker_actor_start_seconds",
                      "Seconds from launching an actor process to its serving calls",
                      prometheus::MetricType::Histogram,
                      {}};
  {
    absl::MutexLock lock(&mu_);
    std::vector<uint64_t> counts = start_buckets_;
    if (counts.empty()) counts.assign(StartBounds().size() + 1, 0);
    starts.metric.push_back(metrics::HistogramSample(StartBounds(), counts, start_sum_s_, {}));
  }
  std::vector<MetricFamily> out = {processes, cpu, rss, exits, gpus, gpus_used, starts};
  if (!hosts_.telemetry) return out;
  MetricFamily calls{"skyrl_actor_calls_total",
                     "Calls an actor answered, by method and status code",
                     prometheus::MetricType::Counter,
                     {}};
  MetricFamily latency{"skyrl_actor_call_seconds",
                       "Seconds from a call's arrival at its actor to its answer (queue wait included)",
                       prometheus::MetricType::Histogram,
                       {}};
  MetricFamily queued{
      "skyrl_actor_queued_calls", "Calls waiting in an actor's queue", prometheus::MetricType::Gauge, {}};
  MetricFamily in_run{
      "skyrl_actor_running_calls", "Calls an actor is running", prometheus::MetricType::Gauge, {}};
  // Asked of every host at once: a frozen one costs its own timeout, not the others' in turn.
  std::vector<absl::StatusOr<v1::ActorTelemetryReply>> replies(running.size());
  ParallelFor(running.size(), kMaxTelemetryThreads,
              [&](size_t i) { replies[i] = hosts_.telemetry(running[i].first); });
  for (size_t i = 0; i < running.size(); ++i) {
    const std::string& actor = running[i].first;
    const absl::StatusOr<v1::ActorTelemetryReply>& t = replies[i];
    if (!t.ok() || !t->enabled()) continue;
    const std::vector<double> bounds(t->latency_bounds_s().begin(), t->latency_bounds_s().end());
    const std::string& cls = t->class_name();
    for (const v1::MethodCallStats& m : t->methods()) {
      std::vector<std::pair<int32_t, uint64_t>> codes(m.calls_by_code().begin(), m.calls_by_code().end());
      std::sort(codes.begin(), codes.end());
      for (const auto& [code, n] : codes)
        calls.metric.push_back(
            Sample(static_cast<double>(n),
                   {{"actor", actor}, {"class", cls}, {"code", CodeName(code)}, {"method", m.method()}},
                   /*counter=*/true));
      const std::vector<uint64_t> counts(m.latency_counts().begin(), m.latency_counts().end());
      if (counts.size() == bounds.size() + 1)
        latency.metric.push_back(metrics::HistogramSample(
            bounds, counts, m.latency_sum_s(), {{"actor", actor}, {"class", cls}, {"method", m.method()}}));
    }
    queued.metric.push_back(Sample(static_cast<double>(t->queued()), {{"actor", actor}, {"class", cls}}));
    in_run.metric.push_back(Sample(static_cast<double>(t->running()), {{"actor", actor}, {"class", cls}}));
  }
  for (MetricFamily* f : {&calls, &latency, &queued, &in_run}) out.push_back(std::move(*f));
  return out;
}

}  // namespace skyrl::worker
