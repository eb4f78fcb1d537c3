#include "runtime/views/telemetry_view.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "runtime/common/parallel.h"

namespace skyrl::views {

std::string HostOf(const std::string& address) {
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    return close == std::string::npos ? address : address.substr(0, close + 1);
  }
  const size_t colon = address.rfind(':');
  // More than one colon without brackets: a bare IPv6 address, no port.
  if (colon == std::string::npos || address.find(':') != colon) return address;
  return address.substr(0, colon);
}

std::vector<MetricsTarget> MetricsTargets(const std::string& head_host, const v1::ListNodesReply& nodes) {
  std::vector<MetricsTarget> out;
  if (nodes.head_metrics_port() > 0)
    out.push_back({"head", absl::StrCat(head_host, ":", nodes.head_metrics_port()), "", ""});
  for (const v1::NodeInfo& n : nodes.nodes()) {
    if (n.state() != v1::NODE_ALIVE || n.metrics_port() <= 0) continue;
    out.push_back(
        {"worker", absl::StrCat(HostOf(n.address()), ":", n.metrics_port()), n.node_id(), n.hostname()});
  }
  return out;
}

std::string RenderTargetsJson(const std::vector<MetricsTarget>& targets) {
  nlohmann::json groups = nlohmann::json::array();
  for (const MetricsTarget& t : targets) {
    nlohmann::json labels = {{"skyrl_role", t.role}};
    if (!t.node_id.empty()) labels["skyrl_node_id"] = t.node_id;
    if (!t.hostname.empty()) labels["skyrl_hostname"] = t.hostname;
    groups.push_back({{"targets", {t.address}}, {"labels", labels}});
  }
  return groups.dump(2) + "\n";
}

std::string RenderTargetsTable(const std::vector<MetricsTarget>& targets) {
  if (targets.empty())
    return "no metrics targets: start skyrl-head and skyrl-worker with --metrics-port (0 picks a port)\n";
  std::string out = absl::StrFormat("%-7s %-28s %-30s %s\n", "ROLE", "TARGET", "NODE", "HOSTNAME");
  for (const MetricsTarget& t : targets)
    absl::StrAppendFormat(&out, "%-7s %-28s %-30s %s\n", t.role,
                          absl::StrCat("http://", t.address, "/metrics"), t.node_id.empty() ? "-" : t.node_id,
                          t.hostname.empty() ? "-" : t.hostname);
  return out;
}

namespace {

// Chrome trace events use microseconds; ours are relative to the earliest one.
struct Trace {
  nlohmann::json events = nlohmann::json::array();
  void Name(const char* what, int pid, int tid, const std::string& name) {
    nlohmann::json e = {{"name", what}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}};
    if (tid >= 0) e["tid"] = tid;
    events.push_back(std::move(e));
  }
  void Slice(const std::string& name, const char* cat, int pid, int tid, int64_t ts, int64_t dur,
             nlohmann::json args) {
    events.push_back({{"name", name},
                      {"cat", cat},
                      {"ph", "X"},
                      {"pid", pid},
                      {"tid", tid},
                      {"ts", ts},
                      {"dur", std::max<int64_t>(dur, 0)},
                      {"args", std::move(args)}});
  }
};

// A field of a step record, or `fallback` when it is absent or of another type: the records are
// written by jobs (any JSON), and one odd field must not cost the whole trace.
template <typename T>
T Field(const nlohmann::json& j, const char* key, T fallback) {
  const auto it = j.find(key);  // end() too when j is not an object
  if (it == j.end()) return fallback;
  if constexpr (std::is_same_v<T, std::string>) {
    return it->is_string() ? it->template get<std::string>() : fallback;
  } else if constexpr (std::is_integral_v<T>) {
    return it->is_number_integer() ? it->template get<T>() : fallback;
  } else {
    return it->is_number() ? it->template get<T>() : fallback;
  }
}

std::string TrackName(const v1::ActorInfo& a) {
  const std::string& name = a.spec().name().empty() ? a.spec().class_name() : a.spec().name();
  return name.empty() ? a.actor_id() : absl::StrCat(name, " ", a.actor_id());
}

}  // namespace

void CollectActorCalls(std::vector<ActorCalls>& actors, const AskCalls& ask) {
  constexpr size_t kMaxConcurrentAsks = 16;
  ParallelFor(actors.size(), kMaxConcurrentAsks, [&](size_t i) {
    ActorCalls& c = actors[i];
    v1::ActorCallsRequest req;
    req.set_actor_id(c.actor.actor_id());
    absl::StatusOr<v1::ActorCallsReply> r = ask(req);
    if (r.ok()) {
      c.telemetry = std::move(*r->mutable_telemetry());
    } else {
      c.error = std::string(r.status().message());
    }
  });
}

std::string RenderTimeline(const std::string& job_id, const std::vector<std::string>& steps,
                           const std::vector<ActorCalls>& actors) {
  std::vector<nlohmann::json> records;
  for (const std::string& s : steps) {
    nlohmann::json j = nlohmann::json::parse(s, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("start_unix_us") || !j["start_unix_us"].is_number_integer()) continue;
    if (j["start_unix_us"].get<int64_t>() > 0) records.push_back(std::move(j));
  }
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const nlohmann::json& r : records) origin = std::min(origin, r["start_unix_us"].get<int64_t>());
  for (const ActorCalls& a : actors)
    for (const v1::CallRecord& c : a.telemetry.records())
      origin = std::min(origin, c.start_unix_us() > 0 ? c.start_unix_us() : c.arrived_unix_us());
  if (origin == std::numeric_limits<int64_t>::max()) origin = 0;

  Trace t;
  t.Name("process_name", 1, -1, absl::StrCat("job ", job_id));
  t.Name("thread_name", 1, 1, "steps");
  for (const nlohmann::json& r : records) {
    const int64_t start = r["start_unix_us"].get<int64_t>();
    const int64_t step = Field<int64_t>(r, "step", 0);
    const double step_s = Field<double>(r, "step_s", 0.0);
    const auto dur = static_cast<int64_t>(std::clamp(step_s, 0.0, 1e9) * 1e6);
    t.Slice(absl::StrCat("step ", step), "step", 1, 1, start - origin, dur,
            {{"step", step},
             {"mean_reward", Field<double>(r, "mean_reward", 0.0)},
             {"kl", Field<double>(r, "kl", 0.0)}});
    const auto phases = r.find("phases");
    if (phases == r.end() || !phases->is_array()) continue;
    for (const nlohmann::json& p : *phases) {
      const int64_t ps = Field<int64_t>(p, "start_unix_us", 0), pe = Field<int64_t>(p, "end_unix_us", 0);
      if (ps <= 0 || pe <= ps) continue;  // a phase that took no time (no wait, say)
      t.Slice(Field<std::string>(p, "phase", "phase"), "phase", 1, 1, ps - origin, pe - ps, {{"step", step}});
    }
  }
  // One process per node, in order of appearance; actors keep their given order.
  std::map<std::string, int> node_pids;
  int next_tid = 1;
  for (const ActorCalls& a : actors) {
    const std::string node = a.actor.node_id().empty() ? "no node" : a.actor.node_id();
    auto [it, added] = node_pids.try_emplace(node, static_cast<int>(node_pids.size()) + 2);
    const int pid = it->second;
    if (added) t.Name("process_name", pid, -1, absl::StrCat("node ", node));
    const int tid = next_tid++;
    std::string track = TrackName(a.actor);
    if (!a.error.empty()) absl::StrAppend(&track, " (no calls: ", a.error.substr(0, 200), ")");
    if (a.telemetry.records_dropped() > 0)
      absl::StrAppend(&track, " (", a.telemetry.records_dropped(), " older calls not kept)");
    t.Name("thread_name", pid, tid, track);
    for (const v1::CallRecord& c : a.telemetry.records()) {
      const bool ran = c.start_unix_us() > 0;
      const int64_t start = ran ? c.start_unix_us() : c.arrived_unix_us();
      nlohmann::json args = {
          {"code", c.code()},
          {"queued_us", (ran ? c.start_unix_us() : c.end_unix_us()) - c.arrived_unix_us()}};
      t.Slice(ran ? c.method() : absl::StrCat(c.method(), " (not run)"), "call", pid, tid, start - origin,
              c.end_unix_us() - start, std::move(args));
    }
  }
  nlohmann::json out = {{"traceEvents", std::move(t.events)},
                        {"displayTimeUnit", "ms"},
                        {"otherData", {{"job_id", job_id}, {"origin_unix_us", origin}}}};
  // Names come from jobs and hosts; invalid UTF-8 (a message cut mid-character, say) is replaced
  // rather than thrown.
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace skyrl::views
