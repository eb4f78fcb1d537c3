// weight_sync: the weight-sync benchmark.
//
//  1. Plan simulation: realistic models and layouts (dense 32B, 30B-A3B MoE, 1T MoE) planned
//     under the default cost model (900 GB/s NVLink in a node, 400 Gb/s NIC per GPU), printing
//     the planned time next to the lower bound.
//  2. Transport: our TCP transport broadcasting one tensor from 1 sender to 1, 2 and 3
//     receivers (each a full replica, so the plan is a broadcast), against torch.distributed's
//     gloo broadcast (bench/weight_sync_gloo.py, run with Debian's /usr/bin/python3) and against
//     one TCP stream on loopback measured here. Loopback addresses only.
//
//   build/bin/weight_sync [--plans-only] [--small] [--no-gloo] [--iters N]
// --small: no 1T plan, 16 MiB transfers, no gloo (the ctest smoke run).
// Bandwidths are delivered bytes (all receivers together) per second, in GB/s (1e9 bytes).
// Ends with RESULT lines: worst_plan_to_bound, loopback_gbps_1stream, tcp_gbps_3rx,
// gloo_gbps_3rx, ratio_vs_gloo_3rx (the last two only when gloo ran).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio.hpp>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "tests/weight_sync/sync_harness.h"
#include "weight_sync/plan/model_zoo.h"
#include "weight_sync/plan/planner.h"
#include "weight_sync/rendezvous.h"
#include "weight_sync/tcp/tcp_transport.h"

namespace ws = skyrl::weight_sync;

namespace {

struct Case {
  std::string name;
  ws::TransformerConfig model;
  ws::Layout trainer;
  ws::Layout inference;
  std::string describe;
  int receiver_first_gpu = -1;
};

std::vector<Case> Cases(bool small) {
  using ws::ExpertSharding;
  using ws::ModelParallel;
  std::vector<Case> out;
  out.push_back({"dense-32B", ws::Dense32B(),
                 ws::Layout::Of(ModelParallel{.tp = 8, .pp = 2, .replicas = 4}),
                 ws::Layout::Engines(8, ModelParallel{.tp = 4}),
                 "64 GPUs TP8xPP2xDP4 -> 8 engines x TP4 (32 GPUs)"});
  out.push_back({"dense-32B-fsdp", ws::Dense32B(), ws::Layout::Of(ws::Fsdp{.shards = 64}),
                 ws::Layout::Engines(16, ModelParallel{.tp = 2}),
                 "64 GPUs FSDP64 -> 16 engines x TP2 (32 GPUs)"});
  out.push_back({"dense-32B-colocated", ws::Dense32B(),
                 ws::Layout::Of(ModelParallel{.tp = 8, .replicas = 4}),
                 ws::Layout::Engines(8, ModelParallel{.tp = 4}),
                 "32 GPUs TP8xDP4 -> 8 engines x TP4 on the same 32 GPUs", 0});
  out.push_back({"moe-30B-A3B", ws::Moe30BA3B(),
                 ws::Layout::Of(ModelParallel{.tp = 2, .ep = 8, .replicas = 2}),
                 ws::Layout::Engines(4, ModelParallel{.tp = 4, .experts = ExpertSharding::kWholeOverAllRanks}),
                 "32 GPUs TP2xEP8xDP2 -> 4 engines x TP4/EP4 (16 GPUs)"});
  out.push_back({"moe-30B-A3B-tp8", ws::Moe30BA3B(),
                 ws::Layout::Of(ModelParallel{.tp = 2, .ep = 8, .replicas = 2}),
                 ws::Layout::Engines(2, ModelParallel{.tp = 8, .experts = ExpertSharding::kWholeOverAllRanks}),
                 "32 GPUs TP2xEP8xDP2 -> 2 engines x TP8/EP8 (4 KV heads replicated x2)"});
  if (!small)
    out.push_back({"moe-1T", ws::Moe1T(), ws::Layout::Of(ModelParallel{.tp = 1, .pp = 16, .ep = 16}),
                   ws::Layout::Engines(4, ModelParallel{.tp = 8, .ep = 4,
                                                        .experts = ExpertSharding::kWholeOverAllRanks}),
                   "256 GPUs PP16xEP16 -> 4 engines x (TP8 attention, EP32 experts) (128 GPUs)"});
  return out;
}

// Best seconds over `iters` broadcasts of `bytes` from one sender to `receivers` receivers
// through our TCP transport (after one warm-up version); -1 on failure. Each receiver is its
// own process, as gloo's ranks are; the sender's Send returns once every receiver confirmed
// the whole version, which is what is timed. Receivers check the last version's bytes.
double TcpBroadcast(int64_t bytes, int receivers, int iters) {
  ws::Model m;
  m.num_layers = 1;
  ws::Param p;
  p.name = "w";
  p.shape = {bytes / 2 / 4096, 4096};
  p.layer = 0;
  m.params.push_back(p);
  auto w = ws::testing::MakeWorld(m, ws::Layout::Of(ws::ModelParallel{}),
                                  ws::Layout::Engines(receivers, ws::ModelParallel{}));
  if (!w.ok()) return -1;
  char tmpl[] = "/tmp/weight_sync_bench_XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return -1;
  const std::string dir = tmpl;
  const int versions = iters + 1;
  std::vector<pid_t> kids;
  for (int r = 0; r < receivers; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      ws::FileRendezvous rdv(dir);
      ws::TcpOptions o;
      o.rendezvous = &rdv;
      o.receiver_rank = r;
      auto t = ws::CreateTcpTransport(o);
      if (!t.ok()) _exit(2);
      ws::VersionedShard shard(bytes);
      for (int v = 1; v <= versions; ++v) {
        absl::Status s = (*t)->Receive(v, (*w)->recv_sched[r], shard);
        if (!s.ok()) {
          std::fprintf(stderr, "receiver %d: %s\n", r, s.ToString().c_str());
          _exit(3);
        }
      }
      const auto& got = *shard.Current().bytes;
      for (int64_t i = 0; i < bytes; ++i)
        if (got[i] != static_cast<uint8_t>(versions)) _exit(4);
      _exit(0);
    }
    kids.push_back(pid);
  }
  ws::FileRendezvous rdv(dir);
  ws::TcpOptions o;
  o.rendezvous = &rdv;
  auto sender = ws::CreateTcpTransport(o);
  std::vector<uint8_t> shard(bytes);
  double best = 1e30;
  bool ok = sender.ok();
  for (int v = 1; ok && v <= versions; ++v) {
    std::memset(shard.data(), v, bytes);
    absl::Time t0 = absl::Now();
    absl::Status s = (*sender)->Send(v, (*w)->send_sched[0], absl::MakeConstSpan(shard));
    double sec = absl::ToDoubleSeconds(absl::Now() - t0);
    if (!s.ok()) {
      std::fprintf(stderr, "weight_sync: tcp sync failed: %s\n", s.ToString().c_str());
      ok = false;
    }
    if (v > 1) best = std::min(best, sec);
  }
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "weight_sync: receiver process failed (status %d)\n", status);
      ok = false;
    }
  }
  std::filesystem::remove_all(dir);
  return ok ? best : -1;
}

// One TCP stream on loopback: best seconds to move `bytes` in 8 MiB writes.
double LoopbackStream(int64_t bytes, int iters) {
  namespace asio = boost::asio;
  using asio::ip::tcp;
  asio::io_context io;
  tcp::acceptor acc(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  tcp::socket a(io), b(io);
  std::thread connect([&] { a.connect(acc.local_endpoint()); });
  acc.accept(b);
  connect.join();
  const int64_t chunk = 8 << 20;
  std::vector<uint8_t> src(chunk, 1), dst(chunk);
  double best = 1e30;
  for (int i = 0; i < iters + 1; ++i) {
    absl::Time t0 = absl::Now();
    std::thread writer([&] {
      for (int64_t done = 0; done < bytes; done += chunk) asio::write(a, asio::buffer(src));
    });
    for (int64_t done = 0; done < bytes; done += chunk) asio::read(b, asio::buffer(dst));
    writer.join();
    if (i > 0) best = std::min(best, absl::ToDoubleSeconds(absl::Now() - t0));
  }
  return best;
}

// (bytes, receivers) -> best seconds, from bench/weight_sync_gloo.py; empty when it cannot run.
std::map<std::pair<int64_t, int>, double> Gloo(const std::vector<int64_t>& sizes, const std::vector<int>& receivers,
                                               int iters) {
  std::map<std::pair<int64_t, int>, double> out;
  std::string cmd = absl::StrCat("/usr/bin/python3 ", SKYRL_BENCH_DIR, "/weight_sync_gloo.py ");
  for (size_t i = 0; i < sizes.size(); ++i) absl::StrAppend(&cmd, i ? "," : "", sizes[i]);
  absl::StrAppend(&cmd, " ");
  for (size_t i = 0; i < receivers.size(); ++i) absl::StrAppend(&cmd, i ? "," : "", receivers[i]);
  absl::StrAppend(&cmd, " ", iters, " 2>&1");
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char line[512];
  while (std::fgets(line, sizeof line, f)) {
    long long b;
    int n;
    double s;
    if (std::sscanf(line, "GLOO %lld %d %lf", &b, &n, &s) == 3) out[{b, n}] = s;
    else std::fprintf(stderr, "gloo: %s", line);
  }
  pclose(f);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  bool small = false, plans_only = false, gloo = true;
  int iters = 3;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--small") == 0) small = true;
    if (std::strcmp(argv[i], "--plans-only") == 0) plans_only = true;
    if (std::strcmp(argv[i], "--no-gloo") == 0) gloo = false;
    if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) iters = std::max(1, std::atoi(argv[i + 1]));
  }
  if (small) gloo = false;

  std::printf("== plan simulation (NVLink 900 GB/s in a node, NIC 400 Gb/s per GPU, 8 GPUs/node)\n");
  std::printf("%-20s %9s %9s %9s %10s %10s %7s %8s  %s\n", "case", "params", "model GB", "moved GB",
              "planned s", "bound s", "ratio", "plan ms", "layout");
  double worst = 0;
  for (const Case& c : Cases(small)) {
    ws::Model m = ws::MakeTransformer(c.model);
    ws::PlanOptions o;
    o.filter = ws::ExcludeNames({"mtp."});  // rollouts do not use the MTP head
    o.cost.receiver_first_gpu = c.receiver_first_gpu;
    absl::Time t0 = absl::Now();
    auto plan = ws::MakePlan(m, c.trainer, c.inference, o);
    double ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
    if (!plan.ok()) {
      std::fprintf(stderr, "weight_sync: %s: %s\n", c.name.c_str(), std::string(plan.status().message()).c_str());
      return 1;
    }
    double ratio = plan->predicted_s / plan->lower_bound_s;
    worst = std::max(worst, ratio);
    std::printf("%-20s %9zu %9.1f %9.1f %10.3f %10.3f %7.3f %8.0f  %s\n", c.name.c_str(), m.params.size(),
                m.TotalBytes() / 1e9, plan->total_bytes / 1e9, plan->predicted_s, plan->lower_bound_s,
                ratio, ms, c.describe.c_str());
  }
  if (plans_only) {
    std::printf("RESULT worst_plan_to_bound %.3f\n", worst);
    return 0;
  }

  const std::vector<int64_t> sizes = small ? std::vector<int64_t>{16 << 20}
                                           : std::vector<int64_t>{256 << 20, int64_t{1} << 30};
  std::printf("\n== transport: 1 sender -> n receivers on loopback, best of %d (GB/s = delivered 1e9 bytes/s, all receivers)\n",
              iters);
  double loop_s = LoopbackStream(sizes.back(), iters);
  double loop_gbps = sizes.back() / loop_s / 1e9;
  std::printf("single TCP stream, %lld MiB: %.3f s, %.2f GB/s (%.1f Gbit/s)\n",
              static_cast<long long>(sizes.back() >> 20), loop_s, loop_gbps, loop_gbps * 8);
  // Each TCP figure is followed at once by the matching gloo figure, so that both see the same
  // load on a shared machine.
  std::printf("%-9s %4s %10s %10s %10s %10s %9s %12s\n", "size", "rx", "tcp s", "tcp GB/s", "gloo s", "gloo GB/s",
              "tcp/gloo", "tcp/1stream");
  double tcp3 = 0, gloo3 = 0;
  for (int64_t b : sizes)
    for (int n : {1, 2, 3}) {
      double s = TcpBroadcast(b, n, iters);
      if (s < 0) return 1;
      double gbps = n * b / s / 1e9;
      std::map<std::pair<int64_t, int>, double> gl;
      if (gloo) gl = Gloo({b}, {n}, iters);
      auto it = gl.find({b, n});
      double gs = it == gl.end() ? 0 : it->second, ggbps = gs > 0 ? n * b / gs / 1e9 : 0;
      std::printf("%-9s %4d %10.3f %10.2f %10s %10s %9s %12.2f\n", absl::StrCat(b >> 20, " MiB").c_str(), n, s, gbps,
                  gs > 0 ? absl::StrFormat("%.3f", gs).c_str() : "-", gs > 0 ? absl::StrFormat("%.2f", ggbps).c_str() : "-",
                  gs > 0 ? absl::StrFormat("%.2f", gbps / ggbps).c_str() : "-", gbps / loop_gbps);
      if (b == sizes.back() && n == 3) {
        tcp3 = gbps;
        gloo3 = ggbps;
      }
    }
  std::printf("RESULT worst_plan_to_bound %.3f\n", worst);
  std::printf("RESULT loopback_gbps_1stream %.2f\n", loop_gbps);
  std::printf("RESULT tcp_gbps_3rx %.2f\n", tcp3);
  if (gloo3 > 0) {
    std::printf("RESULT gloo_gbps_3rx %.2f\n", gloo3);
    std::printf("RESULT ratio_vs_gloo_3rx %.2f\n", tcp3 / gloo3);
  }
  return 0;
}
