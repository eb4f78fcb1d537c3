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
//   build/bin/weight_sync [--plans-only] [--small] [--no-gloo] [--no-copy] [--iters N]
//                         [--chunk-kib N] [--receivers 1,2,3] [--sizes-mib 256,1024]
// --small: no 1T plan, 16 MiB transfers, no gloo (the ctest smoke run).
// The TCP transport runs on each of its paths per row: direct writes over Unix sockets (the
// default on one host), the payload spliced through Unix sockets, loopback TCP (the path
// between hosts) zero-copy and copying.
// Bandwidths are delivered bytes (all receivers together) per second, in GB/s (1e9 bytes).
// Ends with RESULT lines: worst_plan_to_bound, loopback_gbps_1stream, and for 3 receivers
// tcp_gbps_3rx (the default path), tcp_unix_gbps_3rx, tcp_loopback_gbps_3rx,
// tcp_copy_gbps_3rx, gloo_gbps_3rx, ratio_vs_gloo_3rx (default path over gloo),
// ratio_unix_vs_gloo_3rx, ratio_loopback_vs_gloo_3rx: unsuffixed at 1 GiB, suffixed _256mib at
// 256 MiB (gloo figures only when gloo ran).
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

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/weight_sync/sync_harness.h"
#include "weight_sync/plan/hf_params.h"
#include "weight_sync/plan/transfer_planner.h"
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
  out.push_back({"dense-32B", ws::Dense32B(), ws::Layout::Of(ModelParallel{.tp = 8, .pp = 2, .replicas = 4}),
                 ws::Layout::Engines(8, ModelParallel{.tp = 4}),
                 "64 GPUs TP8xPP2xDP4 -> 8 engines x TP4 (32 GPUs)"});
  out.push_back({"dense-32B-fsdp", ws::Dense32B(), ws::Layout::Of(ws::Fsdp{.shards = 64}),
                 ws::Layout::Engines(16, ModelParallel{.tp = 2}),
                 "64 GPUs FSDP64 -> 16 engines x TP2 (32 GPUs)"});
  out.push_back({"dense-32B-colocated", ws::Dense32B(), ws::Layout::Of(ModelParallel{.tp = 8, .replicas = 4}),
                 ws::Layout::Engines(8, ModelParallel{.tp = 4}),
                 "32 GPUs TP8xDP4 -> 8 engines x TP4 on the same 32 GPUs", 0});
  out.push_back(
      {"moe-30B-A3B", ws::Moe30BA3B(), ws::Layout::Of(ModelParallel{.tp = 2, .ep = 8, .replicas = 2}),
       ws::Layout::Engines(4, ModelParallel{.tp = 4, .experts = ExpertSharding::kWholeOverAllRanks}),
       "32 GPUs TP2xEP8xDP2 -> 4 engines x TP4/EP4 (16 GPUs)"});
  out.push_back(
      {"moe-30B-A3B-tp8", ws::Moe30BA3B(), ws::Layout::Of(ModelParallel{.tp = 2, .ep = 8, .replicas = 2}),
       ws::Layout::Engines(2, ModelParallel{.tp = 8, .experts = ExpertSharding::kWholeOverAllRanks}),
       "32 GPUs TP2xEP8xDP2 -> 2 engines x TP8/EP8 (4 KV heads replicated x2)"});
  if (!small)
    out.push_back({"moe-1T", ws::Moe1T(), ws::Layout::Of(ModelParallel{.tp = 1, .pp = 16, .ep = 16}),
                   ws::Layout::Engines(
                       4, ModelParallel{.tp = 8, .ep = 4, .experts = ExpertSharding::kWholeOverAllRanks}),
                   "256 GPUs PP16xEP16 -> 4 engines x (TP8 attention, EP32 experts) (128 GPUs)"});
  return out;
}

// The transport's paths on one host.
enum class Path {
  kDirect,   // the default: Unix sockets, the sender writes into receivers' buffers (direct writes)
  kUnix,     // Unix sockets, the payload spliced through them (same_host_direct_write off)
  kTcp,      // loopback TCP, spliced (same_host_unix_socket off: the path between hosts)
  kTcpCopy,  // loopback TCP, copied (zero_copy_send off too)
};

struct Options {
  bool small = false, plans_only = false, gloo = true, copy_too = true;
  int iters = 3, rounds = 2;
  int64_t chunk_bytes = int64_t{8} << 20;
  int64_t lockstep_bytes = -1;  // --lockstep-kib; -1: the transport's default
  std::vector<int> rx_counts = {1, 2, 3};
  std::vector<int64_t> size_list;  // empty: 256 MiB and 1 GiB (16 MiB with --small)
};

double g_min_spliced = 1;  // lowest share of spliced payload on the zero-copy paths

// Receiver `r` of TcpBroadcast, in its own process: receives `versions` versions of `bytes`,
// checks the last one's bytes and exits (0: all received and right).
[[noreturn]] void ReceiverProcess(const std::string& dir, int r, int64_t bytes, int versions, Path path,
                                  int64_t chunk_bytes, const ws::RankSchedule& sched) {
  ws::FileRendezvous rdv(dir);
  ws::TcpOptions o;
  o.rendezvous = &rdv;
  o.receiver_rank = r;
  o.transfer.chunk_bytes = chunk_bytes;
  o.same_host_unix_socket = path == Path::kDirect || path == Path::kUnix;
  o.same_host_direct_write = path == Path::kDirect;
  auto t = ws::CreateTcpTransport(o);
  if (!t.ok()) _exit(2);
  ws::VersionedShard shard(bytes);
  for (int v = 1; v <= versions; ++v) {
    absl::Status s = (*t)->Receive(v, sched, shard);
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

// Whether every connection and payload byte of a TcpBroadcast went the way `path` asks (from
// the sender's `stats`); also lowers g_min_spliced.
bool WentAsAsked(const ws::TcpStats& stats, Path path, int receivers, int64_t bytes, int versions) {
  const bool same_host = path == Path::kDirect || path == Path::kUnix;
  bool ok = true;
  if ((same_host ? stats.tcp_connections : stats.local_connections) != 0) {
    std::fprintf(stderr, "weight_sync: %lld connections went over %s, not %s\n",
                 static_cast<long long>(same_host ? stats.tcp_connections : stats.local_connections),
                 same_host ? "TCP" : "Unix sockets", same_host ? "Unix sockets" : "TCP");
    ok = false;
  }
  // Every payload byte went the way asked (splicing may fall back to copies where the kernel
  // refuses; the share is printed).
  const int64_t payload = int64_t{receivers} * bytes * versions;
  const int64_t direct = stats.direct_write_bytes, moved = stats.spliced_bytes + stats.copied_bytes;
  if (direct + moved != payload || (path == Path::kDirect) != (direct == payload)) {
    std::fprintf(stderr, "weight_sync: of %lld payload bytes %lld were written directly and %lld sent\n",
                 static_cast<long long>(payload), static_cast<long long>(direct),
                 static_cast<long long>(moved));
    ok = false;
  }
  if ((path == Path::kUnix || path == Path::kTcp) && moved > 0)
    g_min_spliced = std::min(g_min_spliced, static_cast<double>(stats.spliced_bytes) / moved);
  return ok;
}

// Best seconds over `iters` broadcasts of `bytes` from one sender to `receivers` receivers
// through our TCP transport on `path` (after one warm-up version); -1 on failure, including
// when a connection or a payload byte took another path than asked (from the sender's
// TcpStats). Each receiver is its own process, as gloo's ranks are; the sender's Send returns
// once every receiver confirmed the whole version, which is what is timed. Receivers check the
// last version's bytes. `lockstep_bytes` < 0: the transport's default lockstep window.
double TcpBroadcast(int64_t bytes, int receivers, int iters, Path path, int64_t chunk_bytes,
                    int64_t lockstep_bytes) {
  const bool same_host = path == Path::kDirect || path == Path::kUnix;
  const bool zero_copy = path != Path::kTcpCopy;
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
    if (pid == 0) ReceiverProcess(dir, r, bytes, versions, path, chunk_bytes, (*w)->recv_sched[r]);
    kids.push_back(pid);
  }
  ws::FileRendezvous rdv(dir);
  ws::TcpOptions o;
  o.rendezvous = &rdv;
  o.transfer.chunk_bytes = chunk_bytes;
  o.zero_copy_send = zero_copy;
  o.same_host_unix_socket = same_host;
  o.same_host_direct_write = path == Path::kDirect;
  if (lockstep_bytes >= 0) o.lockstep_window_bytes = lockstep_bytes;
  ws::TcpStats stats;
  o.stats = &stats;
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
  if (!WentAsAsked(stats, path, receivers, bytes, versions)) ok = false;
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
std::map<std::pair<int64_t, int>, double> Gloo(const std::vector<int64_t>& sizes,
                                               const std::vector<int>& receivers, int iters) {
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
    if (std::sscanf(line, "GLOO %lld %d %lf", &b, &n, &s) == 3)
      out[{b, n}] = s;
    else
      std::fprintf(stderr, "gloo: %s", line);
  }
  pclose(f);
  return out;
}

void PrintUsage() {
  std::printf(
      "usage: weight_sync [--plans-only] [--small] [--no-gloo] [--no-copy] [--iters N] [--rounds N] "
      "[--chunk-kib N] [--lockstep-kib N]\n"
      "                   [--receivers 1,2,3] [--sizes-mib 256,1024]\n"
      "  --small       no 1T plan, 16 MiB transfers, no gloo (the ctest smoke run)\n"
      "  --no-gloo     skip the torch.distributed gloo baseline\n"
      "  --no-copy     skip the copy-path (zero_copy_send = false) loopback TCP column\n"
      "  --iters N     timed versions per figure, best taken (default 3)\n"
      "  --rounds N    rounds alternating direct, unix, tcp, copy and gloo per row, best of each kept "
      "(default 2)\n"
      "  --chunk-kib N TransferOptions::chunk_bytes for the TCP runs (default 8192)\n"
      "  --lockstep-kib N  TcpOptions::lockstep_window_bytes (default: the transport's, 2048; 0: off, else "
      "64 to 1048576)\n"
      "  --receivers L receiver counts to run (default 1,2,3; RESULT lines need 3)\n"
      "  --sizes-mib L transfer sizes in MiB (default 256,1024; unsuffixed RESULT lines: the last)\n");
}

// Section 1: plans every case and prints the table; `*worst` is the largest planned/bound
// ratio. False when a plan fails.
bool PrintPlans(bool small, double* worst) {
  std::printf("== plan simulation (NVLink 900 GB/s in a node, NIC 400 Gb/s per GPU, 8 GPUs/node)\n");
  std::printf("%-20s %9s %9s %9s %10s %10s %7s %8s  %s\n", "case", "params", "model GB", "moved GB",
              "planned s", "bound s", "ratio", "plan ms", "layout");
  for (const Case& c : Cases(small)) {
    ws::Model m = ws::MakeTransformer(c.model);
    ws::PlanOptions o;
    o.filter = ws::ExcludeNames({"mtp."});  // rollouts do not use the MTP head
    o.cost.receiver_first_gpu = c.receiver_first_gpu;
    absl::Time t0 = absl::Now();
    auto plan = ws::MakePlan(m, c.trainer, c.inference, o);
    double ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
    if (!plan.ok()) {
      std::fprintf(stderr, "weight_sync: %s: %s\n", c.name.c_str(),
                   std::string(plan.status().message()).c_str());
      return false;
    }
    double ratio = plan->predicted_s / plan->lower_bound_s;
    *worst = std::max(*worst, ratio);
    std::printf("%-20s %9zu %9.1f %9.1f %10.3f %10.3f %7.3f %8.0f  %s\n", c.name.c_str(), m.params.size(),
                m.TotalBytes() / 1e9, plan->total_bytes / 1e9, plan->predicted_s, plan->lower_bound_s, ratio,
                ms, c.describe.c_str());
  }
  return true;
}

std::string Fmt(double v, const char* f) { return v > 0 ? absl::StrFormat(f, v) : std::string("-"); }

// GB/s with 3 receivers, by transfer size, for the RESULT lines (0: not measured).
struct ThreeRx {
  std::map<int64_t, double> direct3, unix3, tcp3, copy3, gloo3;
};

// One row of the transport table: `n` receivers of `b` bytes. False when a TCP run failed.
bool MeasureRow(const Options& opts, int64_t b, int n, ThreeRx& three) {
  // Rounds alternate the paths (and gloo) and each keeps its best: on a shared machine the
  // load changes within seconds, and alternating gives every path the same chances.
  std::map<Path, double> best;
  std::vector<Path> paths = {Path::kDirect, Path::kUnix, Path::kTcp};
  if (opts.copy_too) paths.push_back(Path::kTcpCopy);
  double gs = 0;
  for (int round = 0; round < opts.rounds; ++round) {
    for (Path path : paths) {
      const double sec = TcpBroadcast(b, n, opts.iters, path, opts.chunk_bytes, opts.lockstep_bytes);
      if (sec < 0) return false;
      best[path] = best.count(path) ? std::min(best[path], sec) : sec;
    }
    if (opts.gloo) {
      std::map<std::pair<int64_t, int>, double> gl = Gloo({b}, {n}, opts.iters);
      if (auto it = gl.find({b, n}); it != gl.end()) gs = gs > 0 ? std::min(gs, it->second) : it->second;
    }
  }
  auto gbps = [&](Path p) { return best.count(p) ? n * b / best[p] / 1e9 : 0.0; };
  const double dg = gbps(Path::kDirect), ug = gbps(Path::kUnix), tg = gbps(Path::kTcp),
               cg = gbps(Path::kTcpCopy);
  const double gg = gs > 0 ? n * b / gs / 1e9 : 0;
  auto over_gloo = [&](double v) { return Fmt(gg > 0 && v > 0 ? v / gg : 0, "%.2f"); };
  std::printf("%-9s %3d %8.3f %11.2f %9.2f %8.2f %9s %8s %9s %11s %9s %9s %9s\n",
              absl::StrCat(b >> 20, " MiB").c_str(), n, best[Path::kDirect], dg, ug, tg,
              Fmt(cg, "%.2f").c_str(), Fmt(gs, "%.3f").c_str(), Fmt(gg, "%.2f").c_str(),
              over_gloo(dg).c_str(), over_gloo(ug).c_str(), over_gloo(tg).c_str(), over_gloo(cg).c_str());
  if (n == 3) {
    three.direct3[b] = dg;
    three.unix3[b] = ug;
    three.tcp3[b] = tg;
    three.copy3[b] = cg;
    three.gloo3[b] = gg;
  }
  return true;
}

void PrintResults(const std::vector<int64_t>& sizes, double worst, double loop_gbps, ThreeRx& three) {
  // Without a suffix: the largest size (1 GiB; 16 MiB with --small), as before.
  // tcp_gbps_3rx is the TCP transport as it runs by default with every rank on one host (Unix
  // sockets, direct writes); the other paths have their own names.
  std::printf("RESULT worst_plan_to_bound %.3f\n", worst);
  std::printf("RESULT loopback_gbps_1stream %.2f\n", loop_gbps);
  for (int64_t b : sizes) {
    if (!three.direct3.count(b)) continue;
    const std::string suffix = b == sizes.back() ? "" : absl::StrCat("_", b >> 20, "mib");
    std::printf("RESULT tcp_gbps_3rx%s %.2f\n", suffix.c_str(), three.direct3[b]);
    std::printf("RESULT tcp_unix_gbps_3rx%s %.2f\n", suffix.c_str(), three.unix3[b]);
    std::printf("RESULT tcp_loopback_gbps_3rx%s %.2f\n", suffix.c_str(), three.tcp3[b]);
    if (three.copy3[b] > 0) std::printf("RESULT tcp_copy_gbps_3rx%s %.2f\n", suffix.c_str(), three.copy3[b]);
    if (three.gloo3[b] > 0) {
      std::printf("RESULT gloo_gbps_3rx%s %.2f\n", suffix.c_str(), three.gloo3[b]);
      std::printf("RESULT ratio_vs_gloo_3rx%s %.2f\n", suffix.c_str(), three.direct3[b] / three.gloo3[b]);
      std::printf("RESULT ratio_unix_vs_gloo_3rx%s %.2f\n", suffix.c_str(), three.unix3[b] / three.gloo3[b]);
      std::printf("RESULT ratio_loopback_vs_gloo_3rx%s %.2f\n", suffix.c_str(),
                  three.tcp3[b] / three.gloo3[b]);
    }
  }
}

// Section 2: the loopback stream and the transport table, then every RESULT line.
int RunTransport(const Options& opts, double worst) {
  const std::vector<int64_t> sizes = !opts.size_list.empty() ? opts.size_list
                                     : opts.small            ? std::vector<int64_t>{16 << 20}
                                                  : std::vector<int64_t>{256 << 20, int64_t{1} << 30};
  std::printf(
      "\n== transport: 1 sender -> n receivers on loopback, best of %d versions x %d alternating rounds "
      "(GB/s = delivered 1e9 bytes/s, all receivers)\n",
      opts.iters, opts.rounds);
  std::printf("chunk %lld KiB\n", static_cast<long long>(opts.chunk_bytes >> 10));
  double loop_s = LoopbackStream(sizes.back(), opts.iters);
  double loop_gbps = sizes.back() / loop_s / 1e9;
  std::printf("single TCP stream, %lld MiB: %.3f s, %.2f GB/s (%.1f Gbit/s)\n",
              static_cast<long long>(sizes.back() >> 20), loop_s, loop_gbps, loop_gbps * 8);
  // The figures of a row are measured one right after the other, so that they see the same
  // load on a shared machine.
  std::printf(
      "direct = the transport's default on one host (Unix sockets; the sender writes into the receivers' "
      "shared buffers);\n"
      "unix = Unix sockets with the payload spliced through them (same_host_direct_write off);\n"
      "tcp = zero-copy send over loopback TCP (same_host_unix_socket off: what ranks on two hosts use);\n"
      "copy = loopback TCP with zero_copy_send off\n");
  std::printf("%-9s %3s %8s %11s %9s %8s %9s %8s %9s %11s %9s %9s %9s\n", "size", "rx", "direct s",
              "direct GB/s", "unix GB/s", "tcp GB/s", "copy GB/s", "gloo s", "gloo GB/s", "direct/gloo",
              "unix/gloo", "tcp/gloo", "copy/gloo");
  ThreeRx three;
  for (int64_t b : sizes)
    for (int n : opts.rx_counts)
      if (!MeasureRow(opts, b, n, three)) return 1;
  std::printf("(zero-copy share of the payload on the unix and tcp paths, lowest run: %.0f%%)\n",
              g_min_spliced * 100);
  PrintResults(sizes, worst, loop_gbps, three);
  return 0;
}

int Run(const Options& opts) {
  double worst = 0;
  if (!PrintPlans(opts.small, &worst)) return 1;
  if (opts.plans_only) {
    std::printf("RESULT worst_plan_to_bound %.3f\n", worst);
    return 0;
  }
  return RunTransport(opts, worst);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0) {
      PrintUsage();
      return 0;
    }
    if (std::strcmp(argv[i], "--small") == 0) o.small = true;
    if (std::strcmp(argv[i], "--plans-only") == 0) o.plans_only = true;
    if (std::strcmp(argv[i], "--no-gloo") == 0) o.gloo = false;
    if (std::strcmp(argv[i], "--no-copy") == 0) o.copy_too = false;
    if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) o.iters = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) o.rounds = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--lockstep-kib") == 0 && i + 1 < argc)
      o.lockstep_bytes = std::max<int64_t>(0, std::atoll(argv[i + 1])) << 10;
    if (std::strcmp(argv[i], "--chunk-kib") == 0 && i + 1 < argc)
      o.chunk_bytes = std::max<int64_t>(1, std::atoll(argv[i + 1])) << 10;
    if (std::strcmp(argv[i], "--sizes-mib") == 0 && i + 1 < argc)
      for (absl::string_view part : absl::StrSplit(argv[i + 1], ','))
        if (int64_t n = 0; absl::SimpleAtoi(part, &n) && n > 0) o.size_list.push_back(n << 20);
    if (std::strcmp(argv[i], "--receivers") == 0 && i + 1 < argc) {
      o.rx_counts.clear();
      for (absl::string_view part : absl::StrSplit(argv[i + 1], ','))
        if (int n = 0; absl::SimpleAtoi(part, &n) && n > 0) o.rx_counts.push_back(n);
    }
  }
  if (o.small) {
    o.gloo = false;
    o.rounds = 1;
  }
  return Run(o);
}
