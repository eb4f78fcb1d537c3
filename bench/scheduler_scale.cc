// scheduler_bench --shape: Ray's RL placement shapes (its release test for post-training
// placement, test_pg_actor_scalability) through a real skyrl-head, at several cluster sizes.
//
//   build/bin/scheduler_bench --shape pg-per-node[,pg-per-rack] [--scale-nodes 100,2000,10000]
//                             [--actors-per-node 4] [--clients 4] [--inflight 16]
//
// For each shape and size N, a fresh head (memory store) and N simulated nodes of 8 GPUs and
// 64 CPUs, racks of 16 (label rack): registered, then heartbeating at the period the head asks for, as real
// workers do from registration on (each sends back the peer-list version it holds). Then, timed apart:
// - groups: pg-per-node makes one group per node, a single bundle of the whole node
//   (GPU=8, CPU=8, STRICT_PACK); pg-per-rack one group per rack, a bundle per node
//   (STRICT_SPREAD within one rack);
// - actors: --actors-per-node actors in every bundle (GPU=8/k each, by bundle index).
// Before the groups, with the cluster idle, the head's CPU is read over --idle-s (5) s of
// heartbeats; its RSS is read idle and with every actor placed.
// Ends with RESULT lines per shape and size (suffix: 10k for 10,000 nodes, else the count):
// scale_pg_create_per_s_N, scale_actor_create_per_s_N (pg-per-node), scale_rack_pg_create_per_s_N,
// scale_rack_actor_create_per_s_N (pg-per-rack), head_heartbeat_cpu_pct_N, head_rss_mib_N;
// then scale_ratio_LARGEST_to_SMALLEST (pg-per-node actor rate) and scale_failed_ops (all).
#include <signal.h>

#include <thread>

#include "absl/strings/str_format.h"
#include "bench/scheduler_sim.h"
#include "runtime/rpc/channel.h"
#include "skyrl/actor_directory.grpc.pb.h"
#include "skyrl/node.grpc.pb.h"
#include "skyrl/placement_group.grpc.pb.h"

namespace scheduler_bench {
namespace {

constexpr int kRackNodes = 16;
constexpr int kGpusPerNode = 8;

struct Figures {
  std::string shape;
  int nodes = 0, groups = 0, bundles = 0, actors = 0;
  int failed = 0;
  double register_s = 0, pg_per_s = 0, actor_per_s = 0;
  double head_us_per_pg = 0, head_us_per_actor = 0;
  double heartbeats_per_s = 0, head_us_per_heartbeat = 0, heartbeat_cpu_pct = 0, period_s = 0;
  double rss_idle_mib = 0, rss_full_mib = 0;
};

// Counts failures and prints the first of each phase.
class Failures {
 public:
  void Add(const std::string& what, const std::string& why) {
    if (count_.fetch_add(1) == 0)
      std::fprintf(stderr, "scheduler_bench: first failed %s: %s\n", what.c_str(), why.c_str());
  }
  int count() const { return count_.load(); }

 private:
  std::atomic<int> count_{0};
};

// N simulated nodes: registered, then heartbeating every kPeriod from one thread,
// asynchronously, as real workers would (each sends the peer-list version it last got).
class SimNodes {
 public:
  SimNodes(skyrl::v1::NodeService::Stub& stub, int count, int worker_port, Failures& failures)
      : stub_(stub), count_(count), worker_port_(worker_port), failures_(failures) {
    ids_.resize(count);
    versions_.assign(count, 0);
    registered_ = std::make_unique<std::atomic<bool>[]>(count);
  }
  ~SimNodes() { Stop(); }

  bool RegisterAll(int inflight) {
    std::atomic<int> ok{0};
    Pump(
        [&](int i, std::function<void()> finished) {
          auto* c =
              new AsyncCall<skyrl::v1::RegisterNodeRequest, skyrl::v1::RegisterNodeReply>(absl::Seconds(60));
          skyrl::v1::NodeInfo* n = c->req.mutable_node();
          n->set_address(absl::StrCat("127.0.0.1:", worker_port_));
          n->set_hostname(absl::StrCat("sim-", i));
          (*n->mutable_resources_total())["CPU"] = 64;
          (*n->mutable_resources_total())["GPU"] = kGpusPerNode;
          for (int g = 0; g < kGpusPerNode; ++g) n->add_gpu_ids(g);
          (*n->mutable_labels())["rack"] = absl::StrFormat("r%05d", i / kRackNodes);
          stub_.async()->RegisterNode(&c->ctx, &c->req, &c->reply,
                                      [this, c, i, &ok, finished](grpc::Status st) {
                                        if (st.ok()) {
                                          ids_[i] = c->reply.node_id();
                                          if (c->reply.heartbeat_period_ms() > 0)
                                            period_ms_ = c->reply.heartbeat_period_ms();
                                          registered_[i].store(true, std::memory_order_release);
                                          ++ok;
                                        } else {
                                          failures_.Add("register", st.error_message());
                                        }
                                        delete c;
                                        finished();
                                      });
        },
        count_)
        .Run(inflight);
    return ok.load() == count_;
  }

  void StartHeartbeats() {
    beats_ = std::thread([this] {
      while (!stop_.load()) {
        const absl::Time start = absl::Now();
        Pump([this](int i, std::function<void()> finished) { Beat(i, std::move(finished)); }, count_).Run(64);
        ++sweeps_;
        if (const absl::Duration took = absl::Now() - start; took > period())
          std::fprintf(stderr, "scheduler_bench: a heartbeat sweep of %d nodes took %.2f s (period %.0f s)\n",
                       count_, absl::ToDoubleSeconds(took), absl::ToDoubleSeconds(period()));
        while (!stop_.load() && absl::Now() < start + period()) absl::SleepFor(absl::Milliseconds(10));
      }
    });
  }
  void Stop() {
    stop_ = true;
    if (beats_.joinable()) beats_.join();
  }
  // Waits until `more` further sweeps have ended.
  void AwaitSweeps(int more) {
    const int target = sweeps_.load() + more;
    while (sweeps_.load() < target) absl::SleepFor(absl::Milliseconds(20));
  }
  int64_t heartbeats() const { return heartbeats_.load(); }
  // The period the head asks for now (every simulated node applies it at once, as a worker
  // applies the one its last reply asked for).
  absl::Duration period() const { return absl::Milliseconds(period_ms_.load()); }

 private:
  void Beat(int i, std::function<void()> finished) {
    if (!registered_[i].load(std::memory_order_acquire)) return finished();  // not yet
    auto* c = new AsyncCall<skyrl::v1::HeartbeatRequest, skyrl::v1::HeartbeatReply>(absl::Seconds(30));
    c->req.set_node_id(ids_[i]);
    c->req.set_peers_version(versions_[i]);
    c->req.set_period_ms(period_ms_.load());
    stub_.async()->Heartbeat(&c->ctx, &c->req, &c->reply, [this, c, i, finished](grpc::Status st) {
      if (st.ok()) {
        if (c->reply.peers_changed()) versions_[i] = c->reply.peers_version();
        if (c->reply.heartbeat_period_ms() > 0) period_ms_ = c->reply.heartbeat_period_ms();
        ++heartbeats_;
      } else {
        failures_.Add("heartbeat", st.error_message());
      }
      delete c;
      finished();
    });
  }

  skyrl::v1::NodeService::Stub& stub_;
  const int count_;
  const int worker_port_;
  Failures& failures_;
  std::vector<std::string> ids_;
  std::vector<uint64_t> versions_;  // each touched only by its node's heartbeat, one at a time
  std::unique_ptr<std::atomic<bool>[]> registered_;  // ids_[i] is set (heartbeats start at once)
  std::atomic<bool> stop_{false};
  std::atomic<int> sweeps_{0};
  std::atomic<int64_t> heartbeats_{0};
  std::atomic<int64_t> period_ms_{1000};
  std::thread beats_;
};

Figures RunShape(const std::string& shape, int nodes, int actors_per_node, int clients, int inflight,
                 absl::Duration idle) {
  Figures f;
  f.shape = shape;
  f.nodes = nodes;
  Failures failures;
  InstantWorker worker_service;
  int worker_port = 0;
  auto worker_server = StartWorkerServer(worker_service, &worker_port);
  HeadProcess head = StartHead("scheduler-scale");
  if (!worker_server || !head.ok()) {
    f.failed = 1;
    return f;
  }
  const pid_t head_pid = head.proc->pid();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(skyrl::rpc::kMaxMessageBytes);
  auto node_stub = skyrl::v1::NodeService::NewStub(
      grpc::CreateCustomChannel(head.address, grpc::InsecureChannelCredentials(), args));
  // The head may still be starting.
  for (int attempt = 0; attempt < 200; ++attempt) {
    skyrl::v1::ListNodesReply r;
    grpc::Status st = Authed([&](grpc::ClientContext* c) { return node_stub->ListNodes(c, {}, &r); });
    if (st.error_code() != grpc::StatusCode::UNAVAILABLE) break;
    absl::SleepFor(absl::Milliseconds(25));
  }
  SimNodes sim(*node_stub, nodes, worker_port, failures);
  sim.StartHeartbeats();  // each node from its registration on, as a real worker
  absl::Time t0 = absl::Now();
  if (!sim.RegisterAll(clients * inflight)) {
    std::fprintf(stderr, "scheduler_bench: registration failed (head log %s)\n", head.log_path.c_str());
    f.failed = std::max(1, failures.count());
    return f;
  }
  f.register_s = absl::ToDoubleSeconds(absl::Now() - t0);
  sim.AwaitSweeps(2);  // every node holds the current peer list

  // Idle: heartbeats only.
  {
    const double cpu0 = CpuSeconds(head_pid);
    const int64_t beats0 = sim.heartbeats();
    t0 = absl::Now();
    absl::SleepFor(idle);
    const double secs = absl::ToDoubleSeconds(absl::Now() - t0);
    const double cpu = CpuSeconds(head_pid) - cpu0;
    const int64_t beats = sim.heartbeats() - beats0;
    f.heartbeats_per_s = double(beats) / secs;
    f.head_us_per_heartbeat = beats > 0 ? cpu * 1e6 / double(beats) : 0;
    f.period_s = absl::ToDoubleSeconds(sim.period());
    // At the nominal rate (one per node per period), whether or not this machine kept it up.
    f.heartbeat_cpu_pct = f.head_us_per_heartbeat * nodes / absl::ToDoubleMicroseconds(sim.period()) * 100;
    f.rss_idle_mib = RssMib(head_pid);
  }

  std::vector<std::unique_ptr<skyrl::v1::ActorDirectory::Stub>> actor_stubs;
  std::vector<std::unique_ptr<skyrl::v1::PlacementGroupService::Stub>> group_stubs;
  for (int t = 0; t < clients; ++t) {
    grpc::ChannelArguments a;
    a.SetInt("skyrl.client", t);  // a channel (connection) of its own
    auto ch = grpc::CreateCustomChannel(head.address, grpc::InsecureChannelCredentials(), a);
    actor_stubs.push_back(skyrl::v1::ActorDirectory::NewStub(ch));
    group_stubs.push_back(skyrl::v1::PlacementGroupService::NewStub(ch));
  }

  // Groups.
  const bool per_node = shape == "pg-per-node";
  const int bundles_each = per_node ? 1 : kRackNodes;
  f.groups = per_node ? nodes : nodes / kRackNodes;
  f.bundles = f.groups * bundles_each;
  std::vector<std::string> group_ids(f.groups);
  std::atomic<int> made{0};
  double cpu0 = CpuSeconds(head_pid);
  t0 = absl::Now();
  Pump(
      [&](int i, std::function<void()> finished) {
        auto* c = new AsyncCall<skyrl::v1::CreatePlacementGroupRequest, skyrl::v1::CreatePlacementGroupReply>(
            absl::Seconds(60));
        skyrl::v1::PlacementGroupSpec* spec = c->req.mutable_spec();
        for (int b = 0; b < bundles_each; ++b) {
          auto* r = spec->add_bundles()->mutable_resources();
          (*r)["GPU"] = kGpusPerNode;
          (*r)["CPU"] = 8;
        }
        spec->set_strategy(per_node ? skyrl::v1::STRICT_PACK : skyrl::v1::STRICT_SPREAD);
        if (!per_node) spec->set_domain_label("rack");
        group_stubs[i % clients]->async()->CreatePlacementGroup(
            &c->ctx, &c->req, &c->reply, [&, c, i, finished](grpc::Status st) {
              if (st.ok() && c->reply.group().state() == skyrl::v1::PG_CREATED) {
                group_ids[i] = c->reply.group().placement_group_id();
                ++made;
              } else {
                failures.Add("group create",
                             st.ok() ? c->reply.group().pending_reason() : st.error_message());
              }
              delete c;
              finished();
            });
      },
      f.groups)
      .Run(clients * inflight);
  double secs = absl::ToDoubleSeconds(absl::Now() - t0);
  f.pg_per_s = made.load() / secs;
  f.head_us_per_pg = made.load() > 0 ? (CpuSeconds(head_pid) - cpu0) * 1e6 / made.load() : 0;

  // Actors: actors_per_node in every bundle.
  f.actors = f.bundles * actors_per_node;
  std::atomic<int> alive{0};
  cpu0 = CpuSeconds(head_pid);
  t0 = absl::Now();
  Pump(
      [&](int i, std::function<void()> finished) {
        const int bundle = i / actors_per_node;
        const std::string& group = group_ids[bundle / bundles_each];
        if (group.empty()) return finished();  // its group failed (counted there)
        auto* c =
            new AsyncCall<skyrl::v1::CreateActorRequest, skyrl::v1::CreateActorReply>(absl::Seconds(60));
        skyrl::v1::ActorSpec* spec = c->req.mutable_spec();
        spec->set_class_name("echo");
        (*spec->mutable_resources())["GPU"] = double(kGpusPerNode) / actors_per_node;
        spec->set_placement_group_id(group);
        spec->set_bundle_index(bundle % bundles_each);
        actor_stubs[i % clients]->async()->CreateActor(
            &c->ctx, &c->req, &c->reply, [&, c, finished](grpc::Status st) {
              if (st.ok() && c->reply.actor().state() == skyrl::v1::ACTOR_ALIVE) {
                ++alive;
              } else {
                failures.Add("actor create", st.ok() ? c->reply.actor().death_reason() : st.error_message());
              }
              delete c;
              finished();
            });
      },
      f.actors)
      .Run(clients * inflight);
  secs = absl::ToDoubleSeconds(absl::Now() - t0);
  f.actor_per_s = alive.load() / secs;
  f.head_us_per_actor = alive.load() > 0 ? (CpuSeconds(head_pid) - cpu0) * 1e6 / alive.load() : 0;
  f.rss_full_mib = RssMib(head_pid);

  sim.Stop();
  (void)head.proc->Signal(SIGTERM);
  head.proc->Wait();
  worker_server->Shutdown();
  f.failed = failures.count();
  return f;
}

std::string SizeLabel(int nodes) {
  return nodes % 1000 == 0 ? absl::StrCat(nodes / 1000, "k") : absl::StrCat(nodes);
}

}  // namespace

int RunScaleShapes(const std::vector<std::string>& shapes, std::vector<int> sizes, int actors_per_node,
                   int clients, int inflight, double idle_s) {
  std::sort(sizes.begin(), sizes.end());
  std::printf("%-12s %7s %9s %9s %10s %10s %11s %7s %10s %9s %9s %8s %8s %7s\n", "shape", "nodes", "groups",
              "pg/s", "head us/pg", "actors/s", "head us/act", "period", "beats/s", "us/beat", "beat %",
              "rss idle", "rss full", "failed");
  std::vector<Figures> all;
  for (const std::string& shape : shapes)
    for (int n : sizes) {
      Figures f = RunShape(shape, n, actors_per_node, clients, inflight, absl::Seconds(idle_s));
      std::printf("%-12s %7d %9d %9.0f %10.0f %10.0f %11.0f %6.0fs %10.0f %9.1f %9.2f %8.0f %8.0f %7d\n",
                  shape.c_str(), n, f.groups, f.pg_per_s, f.head_us_per_pg, f.actor_per_s,
                  f.head_us_per_actor, f.period_s, f.heartbeats_per_s, f.head_us_per_heartbeat,
                  f.heartbeat_cpu_pct, f.rss_idle_mib, f.rss_full_mib, f.failed);
      std::fflush(stdout);
      all.push_back(f);
    }
  double register_s = 0;
  for (const Figures& f : all) register_s = std::max(register_s, f.register_s);
  std::printf(
      "(period: the heartbeat period the head asks for; beat %%: the head's CPU for one heartbeat per\n"
      " node per period, %% of one core, from the idle window; rss in MiB; registering the largest\n"
      " cluster took %.1f s)\n",
      register_s);
  int failed = 0;
  for (const Figures& f : all) {
    const std::string n = SizeLabel(f.nodes);
    const bool per_node = f.shape == "pg-per-node";
    std::printf("RESULT scale_%spg_create_per_s_%s %.0f\n", per_node ? "" : "rack_", n.c_str(), f.pg_per_s);
    std::printf("RESULT scale_%sactor_create_per_s_%s %.0f\n", per_node ? "" : "rack_", n.c_str(),
                f.actor_per_s);
    if (per_node || std::find(shapes.begin(), shapes.end(), "pg-per-node") == shapes.end()) {
      std::printf("RESULT head_heartbeat_cpu_pct_%s %.2f\n", n.c_str(), f.heartbeat_cpu_pct);
      std::printf("RESULT head_rss_mib_%s %.0f\n", n.c_str(), f.rss_full_mib);
    }
    failed += f.failed;
  }
  auto find = [&](int nodes) -> const Figures* {
    for (const Figures& f : all)
      if (f.shape == "pg-per-node" && f.nodes == nodes) return &f;
    return nullptr;
  };
  if (sizes.size() > 1)
    if (const Figures* big = find(sizes.back()), *small = find(sizes.front());
        big && small && small->actor_per_s > 0)
      std::printf("RESULT scale_ratio_%s_to_%s %.2f\n", SizeLabel(sizes.back()).c_str(),
                  SizeLabel(sizes.front()).c_str(), big->actor_per_s / small->actor_per_s);
  std::printf("RESULT scale_failed_ops %d\n", failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace scheduler_bench
