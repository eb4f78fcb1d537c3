// `skyrl timeline --job ID -o FILE` and `skyrl metrics targets [--json]`: the cluster's
// telemetry through the head (telemetry_view.h renders it).
#include <grpcpp/grpcpp.h>

#include <fstream>
#include <iostream>
#include <memory>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "runtime/cli/commands.h"
#include "runtime/views/telemetry_view.h"
#include "runtime/common/job_metrics_keys.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/status.h"
#include "skyrl/actor_directory.grpc.pb.h"
#include "skyrl/job.grpc.pb.h"
#include "skyrl/kv.grpc.pb.h"
#include "skyrl/logs.grpc.pb.h"
#include "skyrl/node.grpc.pb.h"

namespace skyrl::cli {

using views::ActorCalls;
using views::CollectActorCalls;
using views::HostOf;
using views::MetricsTarget;
using views::MetricsTargets;
using views::RenderTargetsJson;
using views::RenderTargetsTable;
using views::RenderTimeline;
namespace {

struct TimelineOptions {
  std::string job;
  std::string output = "trace.json";
};

// The job's step records from the KV store, in step order.
absl::StatusOr<std::vector<std::string>> FetchSteps(const std::string& address, const std::string& token,
                                                    const std::string& job_id) {
  auto kv = v1::KvService::NewStub(rpc::MakeChannel(address));
  v1::KvListRequest list;
  list.set_prefix(JobMetricsPrefix(job_id));
  v1::KvListReply keys;
  {
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, token, absl::Seconds(30));
    if (absl::Status s = rpc::FromGrpc(kv->List(&ctx, list, &keys)); !s.ok()) return s;
  }
  std::vector<std::string> steps;
  for (const std::string& key : keys.keys()) {
    v1::KvGetRequest get;
    get.set_key(key);
    v1::KvGetReply value;
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, token, absl::Seconds(30));
    absl::Status s = rpc::FromGrpc(kv->Get(&ctx, get, &value));
    if (absl::IsNotFound(s)) continue;  // deleted since the listing
    if (!s.ok()) return s;
    steps.push_back(std::move(*value.mutable_value()));
  }
  return steps;
}

int RunTimeline(const GlobalOptions& global, const TimelineOptions& o) {
  absl::StatusOr<std::string> token = HeadToken(global);
  if (!token.ok()) return Fail(token.status(), 2);
  {
    auto jobs = v1::JobService::NewStub(rpc::MakeChannel(global.address));
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, *token, absl::Seconds(10));
    v1::GetJobRequest req;
    req.set_job_id(o.job);
    v1::GetJobReply reply;
    if (absl::Status s = rpc::FromGrpc(jobs->GetJob(&ctx, req, &reply)); !s.ok())
      return Fail(absl::Status(s.code(), absl::StrCat("--job ", o.job, ": ", s.message())),
                  absl::IsNotFound(s) ? 2 : 1);
  }
  absl::StatusOr<std::vector<std::string>> steps = FetchSteps(global.address, *token, o.job);
  if (!steps.ok()) return Fail(steps.status());
  auto directory = v1::ActorDirectory::NewStub(rpc::MakeChannel(global.address));
  v1::ListActorsReply listed;
  {
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, *token, absl::Seconds(10));
    if (absl::Status s = rpc::FromGrpc(directory->ListActors(&ctx, {}, &listed)); !s.ok()) return Fail(s);
  }
  auto logs = v1::ActorLogService::NewStub(rpc::MakeChannel(global.address));
  std::vector<ActorCalls> actors;
  for (const v1::ActorInfo& a : listed.actors())
    if (a.spec().job_id() == o.job) actors.emplace_back().actor = a;
  CollectActorCalls(actors, [&](const v1::ActorCallsRequest& req) -> absl::StatusOr<v1::ActorCallsReply> {
    v1::ActorCallsReply reply;
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, *token, absl::Seconds(30));
    if (absl::Status s = rpc::FromGrpc(logs->ActorCalls(&ctx, req, &reply)); !s.ok()) return s;
    return reply;
  });
  size_t calls = 0;
  for (const ActorCalls& c : actors) {
    if (!c.error.empty()) std::cerr << "skyrl: actor " << c.actor.actor_id() << ": " << c.error << "\n";
    calls += static_cast<size_t>(c.telemetry.records_size());
  }
  std::ofstream out(o.output, std::ios::binary | std::ios::trunc);
  out << RenderTimeline(o.job, *steps, actors);
  if (!out.flush()) return Fail(absl::InternalError(absl::StrCat("-o: cannot write ", o.output)));
  std::cout << "wrote " << o.output << ": " << steps->size() << " steps, " << actors.size() << " actors, "
            << calls << " calls (open it in https://ui.perfetto.dev or chrome://tracing)\n";
  return 0;
}

int RunTargets(const GlobalOptions& global, bool json) {
  absl::StatusOr<std::string> token = HeadToken(global);
  if (!token.ok()) return Fail(token.status(), 2);
  auto stub = v1::NodeService::NewStub(rpc::MakeChannel(global.address));
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, *token, absl::Seconds(5));
  v1::ListNodesReply nodes;
  if (absl::Status s = rpc::FromGrpc(stub->ListNodes(&ctx, {}, &nodes)); !s.ok())
    return Fail(
        absl::Status(s.code(), absl::StrCat("cannot reach the head at ", global.address, ": ", s.message())));
  const std::vector<MetricsTarget> targets = MetricsTargets(HostOf(global.address), nodes);
  std::cout << (json ? RenderTargetsJson(targets) : RenderTargetsTable(targets));
  return 0;
}

}  // namespace

std::vector<Command> AddTelemetryCommands(CLI::App& app, const GlobalOptions& global) {
  CLI::App* timeline = app.add_subcommand(
      "timeline", "a job's steps and every call of its actors as a Chrome trace (Perfetto)");
  auto t = std::make_shared<TimelineOptions>();
  timeline->add_option("--job", t->job, "the job's id")->required();
  timeline->add_option("-o,--output", t->output, "where to write the trace (default trace.json)");
  CLI::App* metrics = app.add_subcommand("metrics", "the cluster's Prometheus metrics");
  metrics->require_subcommand(1);
  CLI::App* targets = metrics->add_subcommand("targets", "every /metrics endpoint of the cluster, to scrape");
  auto json = std::make_shared<bool>(false);
  targets->add_flag("--json", *json,
                    "as Prometheus HTTP service discovery JSON (what the head serves at "
                    "/metrics/targets on its metrics port)");
  return {{timeline, [&global, t] { return RunTimeline(global, *t); }},
          {targets, [&global, json] { return RunTargets(global, *json); }}};
}

}  // namespace skyrl::cli
