// scheduler: placement rates, in process and through the real head, in one run.
//
//   build/bin/scheduler_bench [--nodes 1000] [--actors 10000] [--groups 1000]
//                             [--head-nodes 100] [--head-actors 10000] [--head-groups 2000]
//                             [--clients 4] [--inflight 16] [--batch 100] [--waiting 10000]
//
// 1. In process, on a simulated cluster of --nodes nodes x 8 GPUs (scheduler::Cluster, what
//    the head holds under its lock): --actors actor placements (plan + allocate, GPU=0.5
//    each, so fractions share devices), then --groups placement groups of 8 x GPU=1 bundles
//    (PACK) created one after another until the cluster is full, then removed.
// 2. Through a real skyrl-head over gRPC (memory store): --head-nodes simulated workers
//    (registered and heartbeating like real workers, served by one in-process WorkerService
//    that starts every actor at once) and --clients channels with --inflight asynchronous
//    calls each: --head-actors actors (one CreateActor RPC each: the headline), the same
//    through CreateActors with --batch specs per call (a separate row), then --head-groups
//    groups of 3 bundles created and removed (two RPCs each: the headline), and the same
//    with the creates batched (CreatePlacementGroups; separate row). Every actor is killed
//    between phases (untimed), so each starts from a free cluster. Each phase also prints
//    CPU per operation for the head and for this process, which varies less than rates on
//    a shared machine.
// 3. Waiting actors, through the same head: --waiting actors that each need a "slot" that no
//    node has free are created (return_pending: PENDING, one at a time), then nodes with 100
//    slots join one at a time, each once the last is full. FIFO placement puts actor i on the
//    (i / 100)th of them; the head's thread count is read while they wait.
// Anchors (Ray's release tests): 10,000 actors at about 550/s; placement group create+remove
// about 790/s on one node; 1,000 groups of 3 bundles at about 19/s across a cluster.
// Ends with RESULT inproc_actor_place_per_s, inproc_pg_p99_ms, head_actor_create_per_s,
// head_pg_create_remove_per_s, and (with --batch > 0) head_actor_create_batched_per_s and
// head_pg_batched_create_remove_per_s; with --waiting > 0, waiting_actors_placed_in_order (1 or
// 0), waiting_actors_placed_per_s and head_threads_while_10k_wait (threads added while waiting).
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <functional>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
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
#include "bench/scheduler_sim.h"

namespace {

using namespace scheduler_bench;

// Groups per CreatePlacementGroups call in the batched row: 4 channels x 50 groups x 3 GPUs
// alive at once fit the 800 GPUs of 100 simulated nodes.
constexpr int kGroupBatch = 50;

// ---- 1. In process ----
struct InProcess {
  double actor_per_s = 0, pg_p99_ms = 0;
};

InProcess RunInProcess(int nodes, int actors, int groups) {
  using namespace skyrl::scheduler;
  Cluster c;
  for (int i = 0; i < nodes; ++i) {
    NodeSpec n{absl::StrFormat("node-%05d", i),
               R("CPU=64,GPU=8,memory=1Ti"),
               {{"rack", absl::StrCat("r", i / 32)}},
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

struct ThroughHead {
  double actor_per_s = 0, pg_per_s = 0, batched_actor_per_s = 0, batched_pg_per_s = 0;
  // The waiting phase: all placed in creation order (1) or not (0), their rate once room came,
  // and the head's threads at idle and while they waited.
  int waiting_in_order = 0;
  double waiting_placed_per_s = 0;
  int threads_idle = 0, threads_waiting = 0;
  bool ok = false;
};

ThroughHead RunThroughHead(int nodes, int actors, int groups, int clients, int inflight, int batch,
                           int waiting) {
  ThroughHead out;
  InstantWorker worker_service;
  int worker_port = 0;
  auto worker_server = StartWorkerServer(worker_service, &worker_port);
  HeadProcess head_process = StartHead("scheduler-bench");
  if (!worker_server || !head_process.ok()) return out;
  const std::string& head = head_process.address;
  skyrl::Subprocess* head_proc = &*head_process.proc;

  auto channel = skyrl::rpc::MakeChannel(head);
  auto node_stub = skyrl::v1::NodeService::NewStub(channel);
  absl::Mutex node_ids_mu;
  std::vector<std::string> node_ids;  // guarded by node_ids_mu once the heartbeats run
  // Registers simulated node i; `extra` adds to its resources (the waiting phase's "slot").
  auto register_node = [&](int i, double slots) -> bool {
    skyrl::v1::RegisterNodeRequest req;
    skyrl::v1::NodeInfo* n = req.mutable_node();
    n->set_address(absl::StrCat("127.0.0.1:", worker_port));
    n->set_hostname(absl::StrCat("sim-", i));
    (*n->mutable_resources_total())["CPU"] = 64;
    (*n->mutable_resources_total())["GPU"] = 8;
    if (slots > 0) (*n->mutable_resources_total())["slot"] = slots;
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
      std::fprintf(stderr, "scheduler_bench: register: %s (head log %s)\n", s.error_message().c_str(),
                   head_process.log_path.c_str());
      return false;
    }
    absl::MutexLock lock(&node_ids_mu);
    node_ids.push_back(reply.node_id());
    return true;
  };
  for (int i = 0; i < nodes; ++i)
    if (!register_node(i, 0)) return out;
  // Heartbeats, as real workers send them.
  std::atomic<bool> stop{false};
  std::thread beats([&] {
    while (!stop.load()) {
      std::vector<std::string> ids;
      {
        absl::MutexLock lock(&node_ids_mu);
        ids = node_ids;
      }
      for (const std::string& id : ids) {
        skyrl::v1::HeartbeatRequest req;
        req.set_node_id(id);
        skyrl::v1::HeartbeatReply reply;
        (void)Authed([&](grpc::ClientContext* c) { return node_stub->Heartbeat(c, req, &reply); });
      }
      for (int i = 0; i < 10 && !stop.load(); ++i) absl::SleepFor(absl::Milliseconds(50));
    }
  });

  // --clients channels (connections), each with --inflight calls outstanding, asynchronous
  // as a driver creating a fleet would be; every create is one CreateActor RPC.
  std::vector<std::unique_ptr<skyrl::v1::ActorDirectory::Stub>> actor_stubs;
  std::vector<std::unique_ptr<skyrl::v1::PlacementGroupService::Stub>> group_stubs;
  for (int t = 0; t < clients; ++t) {
    grpc::ChannelArguments args;
    args.SetInt("skyrl.client", t);                               // a channel (connection) of its own
    args.SetMaxReceiveMessageSize(skyrl::rpc::kMaxMessageBytes);  // ListActors of 20,000 actors
    auto ch = grpc::CreateCustomChannel(head, grpc::InsecureChannelCredentials(), args);
    actor_stubs.push_back(skyrl::v1::ActorDirectory::NewStub(ch));
    group_stubs.push_back(skyrl::v1::PlacementGroupService::NewStub(ch));
  }
  std::atomic<int> created{0}, failed{0};
  auto report_failure = [&](const char* what, const grpc::Status& st, const std::string& detail) {
    if (failed.fetch_add(1) == 0)
      std::fprintf(stderr, "scheduler_bench: first failed %s: %s %s\n", what, st.error_message().c_str(),
                   detail.c_str());
  };
  // Kills every ALIVE actor (untimed), so that each phase starts from a free cluster.
  auto kill_all = [&] {
    std::vector<std::string> ids;
    skyrl::v1::ListActorsReply list;
    (void)Authed([&](grpc::ClientContext* c) {
      return actor_stubs[0]->ListActors(c, skyrl::v1::ListActorsRequest(), &list);
    });
    for (const auto& a : list.actors())
      if (a.state() == skyrl::v1::ACTOR_ALIVE) ids.push_back(a.actor_id());
    Pump(
        [&](int i, std::function<void()> finished) {
          struct Call {
            grpc::ClientContext ctx;
            skyrl::v1::KillActorByIdRequest req;
            skyrl::v1::KillActorByIdReply reply;
          };
          auto* c = new Call;
          skyrl::rpc::PrepareCall(&c->ctx, kToken, absl::Seconds(30));
          c->req.set_actor_id(ids[i]);
          actor_stubs[i % clients]->async()->KillActor(&c->ctx, &c->req, &c->reply,
                                                       [c, finished](grpc::Status) {
                                                         delete c;
                                                         finished();
                                                       });
        },
        int(ids.size()))
        .Run(clients * inflight);
  };
  Latencies all;
  all.us.resize(actors);
  CpuMeter actor_cpu(head_proc->pid());
  absl::Time t0 = absl::Now();
  Pump(
      [&](int i, std::function<void()> finished) {
        struct Call {
          grpc::ClientContext ctx;
          skyrl::v1::CreateActorRequest req;
          skyrl::v1::CreateActorReply reply;
          absl::Time start;
        };
        auto* c = new Call;
        skyrl::rpc::PrepareCall(&c->ctx, kToken, absl::Seconds(30));
        c->req.mutable_spec()->set_class_name("echo");
        (*c->req.mutable_spec()->mutable_resources())["GPU"] = 0.05;
        c->start = absl::Now();
        actor_stubs[i % clients]->async()->CreateActor(
            &c->ctx, &c->req, &c->reply, [&, c, i, finished](grpc::Status st) {
              all.us[i] = absl::ToDoubleMicroseconds(absl::Now() - c->start);
              if (st.ok() && c->reply.actor().state() == skyrl::v1::ACTOR_ALIVE) {
                ++created;
              } else {
                report_failure("create", st, c->reply.actor().death_reason());
              }
              delete c;
              finished();
            });
      },
      actors)
      .Run(clients * inflight);
  double actor_s = absl::ToDoubleSeconds(absl::Now() - t0);
  Row(absl::StrFormat("head: actor creates (%d nodes, %dx%d in flight)", nodes, clients, inflight).c_str(),
      created.load(), actor_s, all, "Ray: 550/s; target >= 5,500/s");
  actor_cpu.Print("actor create:", created.load());
  out.actor_per_s = created.load() / actor_s;

  // The same through CreateActors, --batch specs per call (each still placed and started on
  // its own); a separate row, never the headline.
  if (batch > 0) {
    kill_all();  // both actor phases see the same free cluster
    int calls = (actors + batch - 1) / batch;
    std::atomic<int> bcreated{0};
    Latencies blat;
    blat.us.resize(calls);
    CpuMeter batch_cpu(head_proc->pid());
    t0 = absl::Now();
    Pump(
        [&](int i, std::function<void()> finished) {
          struct Call {
            grpc::ClientContext ctx;
            skyrl::v1::CreateActorsRequest req;
            skyrl::v1::CreateActorsReply reply;
            absl::Time start;
          };
          auto* c = new Call;
          skyrl::rpc::PrepareCall(&c->ctx, kToken, absl::Seconds(60));
          for (int k = i * batch; k < std::min(actors, (i + 1) * batch); ++k) {
            skyrl::v1::ActorSpec* spec = c->req.add_specs();
            spec->set_class_name("echo");
            (*spec->mutable_resources())["GPU"] = 0.05;
          }
          c->start = absl::Now();
          actor_stubs[i % clients]->async()->CreateActors(
              &c->ctx, &c->req, &c->reply, [&, c, i, finished](grpc::Status st) {
                blat.us[i] = absl::ToDoubleMicroseconds(absl::Now() - c->start);
                if (!st.ok()) report_failure("batch", st, "");
                for (const auto& r : c->reply.results()) {
                  if (r.code() == 0 && r.actor().state() == skyrl::v1::ACTOR_ALIVE) {
                    ++bcreated;
                  } else {
                    report_failure("batched create", st, r.message());
                  }
                }
                delete c;
                finished();
              });
        },
        calls)
        .Run(clients);
    double batch_s = absl::ToDoubleSeconds(absl::Now() - t0);
    Row(absl::StrFormat("head: actor creates, batched (%d per call)", batch).c_str(), bcreated.load(),
        batch_s, blat, "latency per call; not the headline");
    batch_cpu.Print("actor create (batched):", bcreated.load());
    out.batched_actor_per_s = bcreated.load() / batch_s;
  }

  kill_all();
  // Groups of 3 x GPU=1, created and removed (two RPCs per cycle), same concurrency, but
  // never more groups alive at once than half of what the cluster holds (8 GPUs a node).
  const int group_capacity = nodes * 8 / 3;
  const int group_inflight = std::max(1, std::min(clients * inflight, group_capacity / 2));
  std::atomic<int> cycles{0};
  Latencies gall;
  gall.us.resize(groups);
  CpuMeter group_cpu(head_proc->pid());
  t0 = absl::Now();
  Pump(
      [&](int i, std::function<void()> finished) {
        struct Call {
          grpc::ClientContext ctx, rm_ctx;
          skyrl::v1::CreatePlacementGroupRequest req;
          skyrl::v1::CreatePlacementGroupReply reply;
          skyrl::v1::RemovePlacementGroupRequest rm;
          skyrl::v1::RemovePlacementGroupReply rm_reply;
          absl::Time start;
        };
        auto* c = new Call;
        skyrl::rpc::PrepareCall(&c->ctx, kToken, absl::Seconds(30));
        for (int b = 0; b < 3; ++b) (*c->req.mutable_spec()->add_bundles()->mutable_resources())["GPU"] = 1;
        c->req.mutable_spec()->set_strategy(skyrl::v1::SPREAD);
        c->start = absl::Now();
        auto* stub = group_stubs[i % clients].get();
        stub->async()->CreatePlacementGroup(
            &c->ctx, &c->req, &c->reply, [&, c, i, stub, finished](grpc::Status st) {
              if (!st.ok() || c->reply.group().state() != skyrl::v1::PG_CREATED) {
                report_failure("group", st, c->reply.group().pending_reason());
                delete c;
                return finished();
              }
              c->rm.set_placement_group_id(c->reply.group().placement_group_id());
              skyrl::rpc::PrepareCall(&c->rm_ctx, kToken, absl::Seconds(30));
              stub->async()->RemovePlacementGroup(
                  &c->rm_ctx, &c->rm, &c->rm_reply, [&, c, i, finished](grpc::Status st) {
                    gall.us[i] = absl::ToDoubleMicroseconds(absl::Now() - c->start);
                    if (st.ok()) {
                      ++cycles;
                    } else {
                      report_failure("remove", st, "");
                    }
                    delete c;
                    finished();
                  });
            });
      },
      groups)
      .Run(group_inflight);
  double pg_s = absl::ToDoubleSeconds(absl::Now() - t0);
  Row(absl::StrFormat("head: group create+remove (%d in flight)", group_inflight).c_str(), cycles.load(),
      pg_s, gall, "Ray: 790/s (1 node), 19/s (cluster); target >= 7,900/s");
  group_cpu.Print("group create+remove:", cycles.load());
  out.pg_per_s = cycles.load() / pg_s;

  // Groups created through CreatePlacementGroups, kGroupBatch per call (each still placed on
  // its own), each removed by its own RemovePlacementGroup; one call per channel at a time,
  // so that the groups alive at once (clients x kGroupBatch x 3 GPUs) fit the cluster.
  if (batch > 0) {
    const int per_call = std::max(1, std::min({batch, kGroupBatch, group_capacity / (2 * clients)}));
    int calls = (groups + per_call - 1) / per_call;
    std::atomic<int> bcycles{0};
    Latencies blat;
    blat.us.resize(calls);
    CpuMeter batch_cpu(head_proc->pid());
    t0 = absl::Now();
    Pump(
        [&](int i, std::function<void()> finished) {
          struct Call {
            grpc::ClientContext ctx;
            skyrl::v1::CreatePlacementGroupsRequest req;
            skyrl::v1::CreatePlacementGroupsReply reply;
            absl::Time start;
            std::atomic<int> removes_left{0};
          };
          auto* c = new Call;
          skyrl::rpc::PrepareCall(&c->ctx, kToken, absl::Seconds(60));
          for (int k = i * per_call; k < std::min(groups, (i + 1) * per_call); ++k) {
            skyrl::v1::PlacementGroupSpec* spec = c->req.add_specs();
            for (int b = 0; b < 3; ++b) (*spec->add_bundles()->mutable_resources())["GPU"] = 1;
            spec->set_strategy(skyrl::v1::SPREAD);
          }
          c->start = absl::Now();
          auto* stub = group_stubs[i % clients].get();
          stub->async()->CreatePlacementGroups(
              &c->ctx, &c->req, &c->reply, [&, c, i, stub, finished](grpc::Status st) {
                std::vector<std::string> ids;
                if (!st.ok()) report_failure("group batch", st, "");
                for (const auto& r : c->reply.results()) {
                  if (r.code() == 0 && r.group().state() == skyrl::v1::PG_CREATED) {
                    ids.push_back(r.group().placement_group_id());
                  } else {
                    report_failure("batched group", st, r.message() + r.group().pending_reason());
                  }
                }
                if (ids.empty()) {
                  delete c;
                  return finished();
                }
                c->removes_left = int(ids.size());
                for (const std::string& id : ids) {
                  struct Rm {
                    grpc::ClientContext ctx;
                    skyrl::v1::RemovePlacementGroupRequest req;
                    skyrl::v1::RemovePlacementGroupReply reply;
                  };
                  auto* rm = new Rm;
                  skyrl::rpc::PrepareCall(&rm->ctx, kToken, absl::Seconds(30));
                  rm->req.set_placement_group_id(id);
                  stub->async()->RemovePlacementGroup(
                      &rm->ctx, &rm->req, &rm->reply, [&, c, rm, i, finished](grpc::Status st) {
                        if (st.ok()) {
                          ++bcycles;
                        } else {
                          report_failure("remove", st, "");
                        }
                        delete rm;
                        if (c->removes_left.fetch_sub(1) == 1) {
                          blat.us[i] = absl::ToDoubleMicroseconds(absl::Now() - c->start);
                          delete c;
                          finished();
                        }
                      });
                }
              });
        },
        calls)
        .Run(clients);
    double batch_s = absl::ToDoubleSeconds(absl::Now() - t0);
    Row(absl::StrFormat("head: groups, batched create (%d/call)+remove", per_call).c_str(), bcycles.load(),
        batch_s, blat, "latency per batch; not the headline");
    batch_cpu.Print("group (batched create)+remove:", bcycles.load());
    out.batched_pg_per_s = bcycles.load() / batch_s;
  }
  // Waiting actors: one node with one "slot", held by a first actor; --waiting actors that each
  // need a slot are created (return_pending, one at a time, so their creation order is known)
  // and wait; then a node with a slot for each joins, and all are placed. Their starts must
  // reach the worker in creation order, and the head must not grow a thread per waiting actor.
  if (waiting > 0) {
    kill_all();
    auto create_slot_actor = [&](skyrl::v1::ActorInfo* info) {
      skyrl::v1::CreateActorRequest req;
      req.mutable_spec()->set_class_name("echo");
      (*req.mutable_spec()->mutable_resources())["slot"] = 1;
      req.set_return_pending(true);
      skyrl::v1::CreateActorReply reply;
      grpc::Status st =
          Authed([&](grpc::ClientContext* c) { return actor_stubs[0]->CreateActor(c, req, &reply); });
      if (!st.ok()) report_failure("waiting create", st, "");
      *info = reply.actor();
      return st.ok();
    };
    skyrl::v1::ActorInfo first;
    bool ok = register_node(nodes, 1) && create_slot_actor(&first);
    absl::SleepFor(absl::Milliseconds(300));  // the first one's start settles
    out.threads_idle = ThreadCount(head_proc->pid());
    std::vector<std::string> order;
    int still_pending = 0;
    absl::Time t_create = absl::Now();
    for (int i = 0; ok && i < waiting; ++i) {
      skyrl::v1::ActorInfo a;
      ok = create_slot_actor(&a);
      order.push_back(a.actor_id());
      if (a.state() == skyrl::v1::ACTOR_PENDING) ++still_pending;
      if (i % 1000 == 999) out.threads_waiting = std::max(out.threads_waiting, ThreadCount(head_proc->pid()));
    }
    double create_s = absl::ToDoubleSeconds(absl::Now() - t_create);
    absl::SleepFor(absl::Milliseconds(300));
    out.threads_waiting = std::max(out.threads_waiting, ThreadCount(head_proc->pid()));
    // Room comes a node at a time, each with slots for the next kSlotsPerNode of them, once
    // the previous node is full: FIFO placement puts actor i on room node i / kSlotsPerNode,
    // which checks the order exactly (the starts' arrival at the worker can be reordered by
    // its concurrent handlers; the table cannot).
    constexpr int kSlotsPerNode = 100;
    worker_service.Record();
    CpuMeter place_cpu(head_proc->pid());
    absl::Time t_room = absl::Now();
    std::vector<std::string> room_nodes;
    for (int placed = 0; ok && placed < waiting;) {
      const int slots = std::min(kSlotsPerNode, waiting - placed);
      ok = register_node(nodes + 1 + int(room_nodes.size()), slots);
      {
        absl::MutexLock lock(&node_ids_mu);
        room_nodes.push_back(node_ids.back());
      }
      placed += slots;
      const absl::Time end = absl::Now() + absl::Seconds(60);
      while (ok && int(worker_service.StartedCount()) < placed && absl::Now() < end)
        absl::SleepFor(absl::Microseconds(200));
      ok = ok && int(worker_service.StartedCount()) == placed;
    }
    double place_s = absl::ToDoubleSeconds(absl::Now() - t_room);
    const int started = int(worker_service.StartedCount());
    place_cpu.Print("waiting actor placed:", started);
    absl::flat_hash_map<std::string, int> room_index;
    for (int i = 0; i < int(room_nodes.size()); ++i) room_index[room_nodes[i]] = i;
    absl::flat_hash_map<std::string, std::string> node_of;
    skyrl::v1::ListActorsReply list;
    (void)Authed([&](grpc::ClientContext* c) {
      return actor_stubs[0]->ListActors(c, skyrl::v1::ListActorsRequest(), &list);
    });
    for (const auto& a : list.actors()) node_of[a.actor_id()] = a.node_id();
    int out_of_order = 0;
    for (int i = 0; i < int(order.size()); ++i) {
      auto node = room_index.find(node_of[order[i]]);
      if (node == room_index.end() || node->second != i / kSlotsPerNode) ++out_of_order;
    }
    std::printf(
        "%-44s %8d %12.0f  (created in %.1f s, %d of them PENDING; head threads %d idle, %d while "
        "they waited)\n",
        "head: waiting actors placed as room came", started, started / place_s, create_s, still_pending,
        out.threads_idle, out.threads_waiting);
    std::printf("  placed out of creation order: %d of %d (room: %d nodes of %d slots, one at a time)\n",
                out_of_order, waiting, int(room_nodes.size()), kSlotsPerNode);
    out.waiting_placed_per_s = started / place_s;
    out.waiting_in_order = ok && started == waiting && still_pending == waiting && out_of_order == 0;
    if (!out.waiting_in_order) report_failure("waiting phase", grpc::Status::OK, "not all placed in order");
  }

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
  // Debian's abseil runs its deadlock detector on every lock (no NDEBUG); the head turns it
  // off too, so neither side pays for it in the figures.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"scheduler_bench: placement rates in process and through the head"};
  int nodes = 1000, actors = 10000, groups = 1000, head_nodes = 100, head_actors = 10000, head_groups = 2000,
      clients = 4, inflight = 16, batch = 100, waiting = 10000;
  app.add_option("--nodes", nodes)->check(CLI::Range(1, 100000));
  app.add_option("--actors", actors)->check(CLI::Range(1, 1000000));
  app.add_option("--groups", groups)->check(CLI::Range(1, 100000));
  app.add_option("--head-nodes", head_nodes)->check(CLI::Range(1, 10000));
  app.add_option("--head-actors", head_actors)->check(CLI::Range(1, 1000000));
  app.add_option("--head-groups", head_groups)->check(CLI::Range(1, 1000000));
  app.add_option("--clients", clients, "channels (connections) to the head")->check(CLI::Range(1, 64));
  app.add_option("--inflight", inflight, "asynchronous calls outstanding per channel")
      ->check(CLI::Range(1, 1024));
  app.add_option("--batch", batch, "specs per CreateActors call in the batched row (0: skip it)")
      ->check(CLI::Range(0, 10000));
  app.add_option("--waiting", waiting, "actors that wait for room, then are placed (0: skip)")
      ->check(CLI::Range(0, 1000000));
  std::vector<std::string> shapes;
  std::vector<int> scale_nodes = {100, 2000, 10000};
  int actors_per_node = 4;
  app.add_option("--shape", shapes, "Ray's RL shapes instead of the phases above: pg-per-node, pg-per-rack")
      ->delimiter(',')
      ->check(CLI::IsMember({"pg-per-node", "pg-per-rack"}));
  app.add_option("--scale-nodes", scale_nodes, "cluster sizes for --shape")
      ->delimiter(',')
      ->check(CLI::Range(1, 10000));
  app.add_option("--actors-per-node", actors_per_node, "actors in each node's bundle for --shape")
      ->check(CLI::IsMember({1, 2, 4, 8}));
  double idle_s = 5;
  app.add_option("--idle-s", idle_s, "seconds of idle heartbeats measured for --shape")
      ->check(CLI::Range(0.5, 600.0));
  CLI11_PARSE(app, argc, argv);
  if (!shapes.empty()) return RunScaleShapes(shapes, scale_nodes, actors_per_node, clients, inflight, idle_s);

  std::printf("%-44s %8s %12s %10s %10s  %s\n", "figure", "n", "per s", "p50 ms", "p99 ms", "anchor");
  InProcess in = RunInProcess(nodes, actors, groups);
  ThroughHead through =
      RunThroughHead(head_nodes, head_actors, head_groups, clients, inflight, batch, waiting);
  if (!through.ok) std::fprintf(stderr, "scheduler_bench: some operations through the head failed\n");
  std::printf("ratio to Ray anchors: head actors %.1fx (of 550/s), head groups %.1fx (of 790/s)\n",
              through.actor_per_s / 550, through.pg_per_s / 790);
  std::printf("RESULT inproc_actor_place_per_s %.0f\n", in.actor_per_s);
  std::printf("RESULT inproc_pg_p99_ms %.4f\n", in.pg_p99_ms);
  std::printf("RESULT head_actor_create_per_s %.0f\n", through.actor_per_s);
  std::printf("RESULT head_pg_create_remove_per_s %.0f\n", through.pg_per_s);
  if (batch > 0) {
    std::printf("RESULT head_actor_create_batched_per_s %.0f\n", through.batched_actor_per_s);
    std::printf("RESULT head_pg_batched_create_remove_per_s %.0f\n", through.batched_pg_per_s);
  }
  if (waiting > 0) {
    std::printf("RESULT waiting_actors_placed_in_order %d\n", through.waiting_in_order);
    std::printf("RESULT waiting_actors_placed_per_s %.0f\n", through.waiting_placed_per_s);
    std::printf("RESULT head_threads_while_10k_wait %d\n", through.threads_waiting - through.threads_idle);
  }
  return through.ok ? 0 : 1;
}
