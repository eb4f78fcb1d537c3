// scheduler: placement rates, in process and through the real head, in one run.
//
//   build/bin/scheduler_bench [--nodes 1000] [--actors 10000] [--groups 1000]
//                             [--head-nodes 100] [--head-actors 10000] [--head-groups 2000]
//                             [--clients 4]
//
// 1. In process, on a simulated cluster of --nodes nodes x 8 GPUs (scheduler::Cluster, what
//    the head holds under its lock): --actors actor placements (plan + allocate, GPU=0.5
//    each, so fractions share devices), then --groups placement groups of 8 x GPU=1 bundles
//    (PACK) created one after another until the cluster is full, then removed.
// 2. Through a real skyrl-head over gRPC (memory store): --head-nodes simulated workers
//    (threads in this process that register and heartbeat like real workers, served by one
//    in-process WorkerService that starts every actor at once) and --clients concurrent
//    callers creating --head-actors actors, then creating and removing --head-groups groups
//    of 3 bundles.
// Anchors (Ray's release tests): 10,000 actors at about 550/s; placement group create+remove
// about 790/s on one node; 1,000 groups of 3 bundles at about 19/s across a cluster.
// Ends with RESULT inproc_actor_place_per_s, inproc_pg_p99_ms, head_actor_create_per_s,
// head_pg_create_remove_per_s.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "runtime/common/ids.h"
#include "runtime/common/subprocess.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "scheduler/cluster.h"
#include "skyrl/actor_directory.grpc.pb.h"
#include "skyrl/node.grpc.pb.h"
#include "skyrl/placement_group.grpc.pb.h"
#include "skyrl/worker.grpc.pb.h"
#include "tests/util/paths.h"

namespace {

constexpr char kToken[] = "scheduler-bench-token-0123456789abcdef";

struct Latencies {
  std::vector<double> us;
  double Percentile(double p) {
    if (us.empty()) return 0;
    std::sort(us.begin(), us.end());
    return us[std::min(us.size() - 1, size_t(p * double(us.size())))];
  }
};

void Row(const char* what, int n, double seconds, Latencies& lat, const char* anchor) {
  std::printf("%-44s %8d %12.0f %10.3f %10.3f  %s\n", what, n, n / seconds, lat.Percentile(0.5) / 1000,
              lat.Percentile(0.99) / 1000, anchor);
}

skyrl::ResourceSet R(const std::string& text) { return *skyrl::ResourceSet::Parse(text); }

// ---- 1. In process ----
struct InProcess {
  double actor_per_s = 0, pg_p99_ms = 0;
};

InProcess RunInProcess(int nodes, int actors, int groups) {
  using namespace skyrl::scheduler;
  Cluster c;
  for (int i = 0; i < nodes; ++i) {
    NodeSpec n{absl::StrFormat("node-%05d", i), R("CPU=64,GPU=8,memory=1Ti"), {{"rack", absl::StrCat("r", i / 32)}},
               {0, 1, 2, 3, 4, 5, 6, 7}};
    (void)c.AddNode(n);
  }
  InProcess out;
  Latencies lat;
  Demand half{R("GPU=0.5"), {}};
  absl::Time t0 = absl::Now();
  int placed = 0;
  for (int i = 0; i < actors; ++i) {
    absl::Time s = absl::Now();
    absl::StatusOr<Slot> slot = c.PlanActor(half);
    if (slot.ok() && c.AllocateActor(absl::StrCat("a", i), half.resources, *slot).ok()) ++placed;
    lat.us.push_back(absl::ToDoubleMicroseconds(absl::Now() - s));
  }
  double secs = absl::ToDoubleSeconds(absl::Now() - t0);
  out.actor_per_s = placed / secs;
  Row("in-process actor placements (GPU=0.5)", placed, secs, lat, "Ray: 550/s through its GCS");
  for (int i = 0; i < actors; ++i) c.ReleaseActor(absl::StrCat("a", i));

  GroupRequest g;
  g.strategy = Strategy::kPack;
  for (int b = 0; b < 8; ++b) g.bundles.push_back(Demand{R("GPU=1,CPU=1"), {}});
  Latencies create, remove;
  t0 = absl::Now();
  int made = 0;
  for (int i = 0; i < groups; ++i) {
    absl::Time s = absl::Now();
    g.name = absl::StrCat("g", i);
    absl::StatusOr<std::vector<Slot>> slots = c.PlanGroup(g);
    if (slots.ok() && c.ReserveGroup(g.name, g, {slots->begin(), slots->end()}).ok()) ++made;
    create.us.push_back(absl::ToDoubleMicroseconds(absl::Now() - s));
  }
  double create_s = absl::ToDoubleSeconds(absl::Now() - t0);
  t0 = absl::Now();
  for (int i = 0; i < groups; ++i) {
    absl::Time s = absl::Now();
    c.RemoveGroup(absl::StrCat("g", i));
    remove.us.push_back(absl::ToDoubleMicroseconds(absl::Now() - s));
  }
  double remove_s = absl::ToDoubleSeconds(absl::Now() - t0);
  Row("in-process group create (8 x GPU=1, PACK)", made, create_s, create, "target: p99 < 1 ms");
  Row("in-process group remove", groups, remove_s, remove, "");
  out.pg_p99_ms = create.Percentile(0.99) / 1000;
  if (made < groups) std::fprintf(stderr, "scheduler_bench: only %d of %d groups fit\n", made, groups);
  return out;
}

// ---- 2. Through the head ----
class InstantWorker final : public skyrl::v1::WorkerService::Service {
  grpc::Status StartActor(grpc::ServerContext*, const skyrl::v1::StartActorRequest* req,
                          skyrl::v1::StartActorReply* reply) override {
    reply->set_address("127.0.0.1:1");
    reply->set_log_path(absl::StrCat("/dev/null/", req->actor_id()));
    return grpc::Status::OK;
  }
  grpc::Status KillActor(grpc::ServerContext*, const skyrl::v1::KillActorRequest*,
                         skyrl::v1::KillActorReply*) override {
    return grpc::Status::OK;
  }
};

template <typename Call>
grpc::Status Authed(Call call) {
  grpc::ClientContext ctx;
  skyrl::rpc::PrepareCall(&ctx, kToken, absl::Seconds(30));
  return call(&ctx);
}

struct ThroughHead {
  double actor_per_s = 0, pg_per_s = 0;
  bool ok = false;
};

ThroughHead RunThroughHead(int nodes, int actors, int groups, int clients) {
  ThroughHead out;
  std::string dir = skyrl::testing::MakeTempDir("scheduler-bench");
  InstantWorker worker_service;
  grpc::ServerBuilder wb;
  int worker_port = 0;
  wb.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &worker_port);
  wb.RegisterService(&worker_service);
  auto worker_server = wb.BuildAndStart();
  auto head_port = skyrl::PickFreePort();
  if (!worker_server || !head_port.ok()) return out;
  std::string head = absl::StrCat("127.0.0.1:", *head_port);
  skyrl::SpawnOptions o;
  o.argv = {skyrl::testing::BinDir() + "/skyrl-head", "--port", std::to_string(*head_port), "--log-level", "warn"};
  o.env_set = {{"HOME", dir}, {"SKYRL_TOKEN", kToken}};
  o.log_path = dir + "/head.log";
  auto head_proc = skyrl::Subprocess::Start(o);
  if (!head_proc.ok()) return out;

  auto channel = skyrl::rpc::MakeChannel(head);
  auto node_stub = skyrl::v1::NodeService::NewStub(channel);
  std::vector<std::string> node_ids;
  for (int i = 0; i < nodes; ++i) {
    skyrl::v1::RegisterNodeRequest req;
    skyrl::v1::NodeInfo* n = req.mutable_node();
    n->set_address(absl::StrCat("127.0.0.1:", worker_port));
    n->set_hostname(absl::StrCat("sim-", i));
    (*n->mutable_resources_total())["CPU"] = 64;
    (*n->mutable_resources_total())["GPU"] = 8;
    for (int g = 0; g < 8; ++g) n->add_gpu_ids(g);
    (*n->mutable_labels())["rack"] = absl::StrCat("r", i / 16);
    skyrl::v1::RegisterNodeReply reply;
    grpc::Status s;
    for (int attempt = 0; attempt < 200; ++attempt) {  // the head may still be starting
      s = Authed([&](grpc::ClientContext* c) { return node_stub->RegisterNode(c, req, &reply); });
      if (s.error_code() != grpc::StatusCode::UNAVAILABLE) break;
      absl::SleepFor(absl::Milliseconds(25));
    }
    if (!s.ok()) {
      std::fprintf(stderr, "scheduler_bench: register: %s (head log %s)\n", s.error_message().c_str(), o.log_path.c_str());
      return out;
    }
    node_ids.push_back(reply.node_id());
  }
  // Heartbeats, as real workers send them.
  std::atomic<bool> stop{false};
  std::thread beats([&] {
    while (!stop.load()) {
      for (const std::string& id : node_ids) {
        skyrl::v1::HeartbeatRequest req;
        req.set_node_id(id);
        skyrl::v1::HeartbeatReply reply;
        (void)Authed([&](grpc::ClientContext* c) { return node_stub->Heartbeat(c, req, &reply); });
      }
      for (int i = 0; i < 10 && !stop.load(); ++i) absl::SleepFor(absl::Milliseconds(50));
    }
  });

  // Actors: --clients callers, each on its own channel.
  std::atomic<int> next{0}, created{0}, failed{0};
  std::vector<Latencies> lat(clients);
  absl::Time t0 = absl::Now();
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t)
    threads.emplace_back([&, t] {
      grpc::ChannelArguments args;
      args.SetInt("skyrl.client", t);  // a channel (connection) of its own
      auto stub = skyrl::v1::ActorDirectory::NewStub(
          grpc::CreateCustomChannel(head, grpc::InsecureChannelCredentials(), args));
      while (next.fetch_add(1) < actors) {
        skyrl::v1::CreateActorRequest req;
        req.mutable_spec()->set_class_name("echo");
        (*req.mutable_spec()->mutable_resources())["GPU"] = 0.05;
        skyrl::v1::CreateActorReply reply;
        absl::Time s = absl::Now();
        grpc::Status st = Authed([&](grpc::ClientContext* c) { return stub->CreateActor(c, req, &reply); });
        lat[t].us.push_back(absl::ToDoubleMicroseconds(absl::Now() - s));
        if (st.ok() && reply.actor().state() == skyrl::v1::ACTOR_ALIVE) {
          ++created;
        } else if (failed.fetch_add(1) == 0) {
          std::fprintf(stderr, "scheduler_bench: first failed create: %s\n", st.error_message().c_str());
        }
      }
    });
  for (auto& t : threads) t.join();
  threads.clear();
  double actor_s = absl::ToDoubleSeconds(absl::Now() - t0);
  Latencies all;
  for (auto& l : lat) all.us.insert(all.us.end(), l.us.begin(), l.us.end());
  Row(absl::StrFormat("head: actor creates (%d nodes, %d callers)", nodes, clients).c_str(), created.load(), actor_s,
      all, "Ray: 550/s; target >= 5,500/s");
  out.actor_per_s = created.load() / actor_s;

  // Groups of 3 x GPU=1, created and removed, --clients callers.
  next = 0;
  std::atomic<int> cycles{0};
  std::vector<Latencies> glat(clients);
  t0 = absl::Now();
  for (int t = 0; t < clients; ++t)
    threads.emplace_back([&, t] {
      grpc::ChannelArguments args;
      args.SetInt("skyrl.client", 100 + t);
      auto stub = skyrl::v1::PlacementGroupService::NewStub(
          grpc::CreateCustomChannel(head, grpc::InsecureChannelCredentials(), args));
      while (next.fetch_add(1) < groups) {
        skyrl::v1::CreatePlacementGroupRequest req;
        for (int b = 0; b < 3; ++b) (*req.mutable_spec()->add_bundles()->mutable_resources())["GPU"] = 1;
        req.mutable_spec()->set_strategy(skyrl::v1::SPREAD);
        skyrl::v1::CreatePlacementGroupReply reply;
        absl::Time s = absl::Now();
        grpc::Status st = Authed([&](grpc::ClientContext* c) { return stub->CreatePlacementGroup(c, req, &reply); });
        if (!st.ok() || reply.group().state() != skyrl::v1::PG_CREATED) {
          if (failed.fetch_add(1) == 0)
            std::fprintf(stderr, "scheduler_bench: first failed group: %s %s\n", st.error_message().c_str(),
                         reply.group().pending_reason().c_str());
          continue;
        }
        skyrl::v1::RemovePlacementGroupRequest rm;
        rm.set_placement_group_id(reply.group().placement_group_id());
        skyrl::v1::RemovePlacementGroupReply rm_reply;
        st = Authed([&](grpc::ClientContext* c) { return stub->RemovePlacementGroup(c, rm, &rm_reply); });
        glat[t].us.push_back(absl::ToDoubleMicroseconds(absl::Now() - s));
        if (st.ok()) ++cycles;
      }
    });
  for (auto& t : threads) t.join();
  double pg_s = absl::ToDoubleSeconds(absl::Now() - t0);
  Latencies gall;
  for (auto& l : glat) gall.us.insert(gall.us.end(), l.us.begin(), l.us.end());
  Row("head: group create+remove (3 x GPU=1, SPREAD)", cycles.load(), pg_s, gall,
      "Ray: 790/s (1 node), 19/s (cluster); target >= 7,900/s");
  out.pg_per_s = cycles.load() / pg_s;
  stop = true;
  beats.join();
  (void)head_proc->Signal(SIGTERM);
  head_proc->Wait();
  worker_server->Shutdown();
  out.ok = failed.load() == 0;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"scheduler_bench: placement rates in process and through the head"};
  int nodes = 1000, actors = 10000, groups = 1000, head_nodes = 100, head_actors = 10000, head_groups = 2000,
      clients = 4;
  app.add_option("--nodes", nodes)->check(CLI::Range(1, 100000));
  app.add_option("--actors", actors)->check(CLI::Range(1, 1000000));
  app.add_option("--groups", groups)->check(CLI::Range(1, 100000));
  app.add_option("--head-nodes", head_nodes)->check(CLI::Range(1, 10000));
  app.add_option("--head-actors", head_actors)->check(CLI::Range(1, 1000000));
  app.add_option("--head-groups", head_groups)->check(CLI::Range(1, 1000000));
  app.add_option("--clients", clients)->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);

  std::printf("%-44s %8s %12s %10s %10s  %s\n", "figure", "n", "per s", "p50 ms", "p99 ms", "anchor");
  InProcess in = RunInProcess(nodes, actors, groups);
  ThroughHead through = RunThroughHead(head_nodes, head_actors, head_groups, clients);
  if (!through.ok) std::fprintf(stderr, "scheduler_bench: some operations through the head failed\n");
  std::printf("ratio to Ray anchors: head actors %.1fx (of 550/s), head groups %.1fx (of 790/s)\n",
              through.actor_per_s / 550, through.pg_per_s / 790);
  std::printf("RESULT inproc_actor_place_per_s %.0f\n", in.actor_per_s);
  std::printf("RESULT inproc_pg_p99_ms %.4f\n", in.pg_p99_ms);
  std::printf("RESULT head_actor_create_per_s %.0f\n", through.actor_per_s);
  std::printf("RESULT head_pg_create_remove_per_s %.0f\n", through.pg_per_s);
  return through.ok ? 0 : 1;
}
