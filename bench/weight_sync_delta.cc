// weight_sync_delta: deltas (TcpOptions::delta) against full syncs, same version pairs, same run.
//
// One bf16 tensor of --mib MiB, 1 sender to --receivers full replicas over TCP: on loopback,
// or with --wire-gbps between two network namespaces (tests/util/netns.h; needs root), the
// sender's host sending at most that rate (a tbf qdisc on its link), as a NIC would. The trainer keeps fp32
// master weights, as mixed-precision trainers do; a step moves every master weight by lr x u, u uniform in
// [-1, 1] (the size of Adam's normalized update), and the engines get the bf16 rounding of the result, so a
// word changes only when its master weight crosses a rounding boundary. Per iteration, each transport pair
// (deltas off, deltas on) syncs the version before the step (untimed: the receivers then hold
// it), then the version after it (timed); then a version of random bytes (every word changes:
// deltas cannot pay and must cost next to nothing).
//
//   build/bin/weight_sync_delta [--mib 512] [--receivers 3] [--lr 1e-6] [--iters 3]
//                               [--wire-gbps 10]
// --small: 16 MiB, 1 iteration (the ctest smoke run).
// Ends with RESULT delta_bytes_ratio (wire bytes / payload for the step, deltas on),
// delta_sync_speedup (full sync time / delta sync time, the step) and delta_random_speedup
// (the same for random bytes; >= 0.95 means deltas that do not pay cost under 5 %).
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/util/netns.h"
#include "tests/weight_sync/sync_harness.h"
#include "weight_sync/rendezvous.h"
#include "weight_sync/tcp/tcp_transport.h"

namespace ws = skyrl::weight_sync;

namespace {

uint16_t ToBf16(float f) {  // round to nearest even
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b += 0x7FFF + ((b >> 16) & 1);
  return static_cast<uint16_t>(b >> 16);
}

std::vector<uint8_t> Bf16Of(const std::vector<float>& w) {
  std::vector<uint8_t> out(w.size() * 2);
  for (size_t i = 0; i < w.size(); ++i) {
    const uint16_t h = ToBf16(w[i]);
    std::memcpy(&out[i * 2], &h, 2);
  }
  return out;
}

// Moves the calling thread into network namespace `ns` ("": stays).
void EnterNetns(const std::string& ns) {
  if (ns.empty()) return;
  const int fd = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
    std::perror(("setns " + ns).c_str());
    std::exit(1);
  }
  close(fd);
}

// Where the ranks run: the sender's and the receivers' namespaces and the receivers' address
// (all empty: this namespace, loopback).
struct Hosts {
  std::string sender_ns, receiver_ns, receiver_address = "127.0.0.1";
};

// A sender and its receivers, deltas on or off.
struct Pair {
  ws::InMemoryRendezvous rdv;
  ws::TcpStats stats;
  std::unique_ptr<ws::Transport> sender;
  std::vector<std::unique_ptr<ws::Transport>> receivers;
  std::vector<std::unique_ptr<ws::VersionedShard>> shards;

  const Hosts hosts;

  Pair(const ws::testing::World& w, bool delta, Hosts where) : hosts(std::move(where)) {
    ws::TcpOptions o;
    o.rendezvous = &rdv;
    o.delta = delta;
    o.same_host_unix_socket = false;  // TCP: the path between hosts
    o.stats = &stats;
    sender = *ws::CreateTcpTransport(o);
    // Receivers listen in their namespace, from a thread that enters it.
    std::thread([&] {
      EnterNetns(hosts.receiver_ns);
      for (int r = 0; r < w.plan.num_receivers; ++r) {
        ws::TcpOptions ro = o;
        ro.receiver_rank = r;
        ro.bind_host = hosts.receiver_address;
        ro.stats = nullptr;
        receivers.push_back(*ws::CreateTcpTransport(ro));
        shards.push_back(std::make_unique<ws::VersionedShard>(w.rlayout[r].Bytes()));
      }
    }).join();
  }
  // Seconds for one sync of `bytes` (the sender's shard) as `version`; exits on failure.
  double Sync(const ws::testing::World& w, uint64_t version, const std::vector<uint8_t>& bytes) {
    std::vector<absl::Status> got(receivers.size());
    const absl::Time t0 = absl::Now();
    std::vector<std::thread> threads;
    for (size_t r = 0; r < receivers.size(); ++r)
      threads.emplace_back([&, r] { got[r] = receivers[r]->Receive(version, w.recv_sched[r], *shards[r]); });
    absl::Status sent;
    std::thread([&] {  // its connections are made from the sender's namespace
      EnterNetns(hosts.sender_ns);
      sent = sender->Send(version, w.send_sched[0], absl::MakeConstSpan(bytes));
    })
        .join();
    for (auto& t : threads) t.join();
    const double s = absl::ToDoubleSeconds(absl::Now() - t0);
    for (const absl::Status& g : got)
      if (!g.ok() || !sent.ok()) {
        std::fprintf(stderr, "sync v%llu failed: %s / %s\n", static_cast<unsigned long long>(version),
                     sent.ToString().c_str(), g.ToString().c_str());
        std::exit(1);
      }
    for (size_t r = 0; r < shards.size(); ++r)
      if (!std::equal(bytes.begin(), bytes.end(), shards[r]->Current().bytes->data())) {
        std::fprintf(stderr, "receiver %zu holds other bytes after v%llu\n", r,
                     static_cast<unsigned long long>(version));
        std::exit(1);
      }
    return s;
  }
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t mib = 512;
  int receivers = 3, iters = 3;
  double lr = 1e-6, wire_gbps = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    bool ok = true;
    if (a == "--small") {
      mib = 16;
      iters = 1;
    } else if (a == "--mib") {
      ok = absl::SimpleAtoi(next(), &mib) && mib > 0;
    } else if (a == "--receivers") {
      ok = absl::SimpleAtoi(next(), &receivers) && receivers > 0;
    } else if (a == "--iters") {
      ok = absl::SimpleAtoi(next(), &iters) && iters > 0;
    } else if (a == "--lr") {
      ok = absl::SimpleAtod(next(), &lr) && lr > 0;
    } else if (a == "--wire-gbps") {
      ok = absl::SimpleAtod(next(), &wire_gbps) && wire_gbps > 0;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "usage: weight_sync_delta [--small] [--mib N] [--receivers N] [--iters N] [--lr X] "
                   "[--wire-gbps X]\n");
      return 2;
    }
  }
  constexpr int64_t kCols = 4096;
  ws::Model m;
  m.num_layers = 1;
  ws::Param p;
  p.name = "w";
  p.shape = {mib * (1 << 20) / (kCols * 2), kCols};
  p.layer = 0;
  m.params.push_back(p);
  auto world = ws::testing::MakeWorld(m, ws::Layout::Of(ws::ModelParallel{}),
                                      ws::Layout::Engines(receivers, ws::ModelParallel{}));
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.status().ToString().c_str());
    return 1;
  }
  const ws::testing::World& w = **world;

  Hosts hosts;
  std::unique_ptr<skyrl::testing::NetnsLab> lab;
  std::string wire = "loopback TCP";
  if (wire_gbps > 0) {
    absl::StatusOr<std::unique_ptr<skyrl::testing::NetnsLab>> made = skyrl::testing::NetnsLab::Create(2);
    absl::Status limited = made.status();
    if (made.ok()) {
      lab = std::move(*made);
      const std::string rate = absl::StrCat(wire_gbps, "gbit");
      std::vector<std::string> tbf = lab->Exec(0);
      for (const char* arg :
           {"sh", "-c",
            "for d in $(ls /sys/class/net); do [ $d = lo ] || tc qdisc replace dev $d root tbf rate $0 "
            "burst 4mb latency 100ms || exit 1; done"})
        tbf.push_back(arg);
      tbf.push_back(rate);
      limited = skyrl::testing::RunCommand(tbf);
    }
    if (limited.ok()) {
      hosts = Hosts{lab->Namespace(0), lab->Namespace(1), lab->Address(1)};
      wire = absl::StrCat("TCP between two network namespaces, the sender's link at ", wire_gbps, " Gb/s");
    } else {
      lab.reset();
      std::printf("no shaped wire (%s): loopback instead\n", std::string(limited.message()).c_str());
    }
  }
  std::printf("weight_sync_delta: %lld MiB bf16, 1 sender -> %d receivers over %s, lr %g\n",
              static_cast<long long>(mib), receivers, wire.c_str(), lr);
  std::mt19937 rng(7);
  std::normal_distribution<float> init(0.0f, 0.02f);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> master(static_cast<size_t>(p.NumElements()));
  for (float& x : master) x = init(rng);
  Pair full(w, /*delta=*/false, hosts), delta(w, /*delta=*/true, hosts);
  std::vector<double> full_step, delta_step, full_random, delta_random;
  int64_t step_payload = 0, step_wire = 0;
  uint64_t version = 0;
  for (int it = 0; it < iters; ++it) {
    const std::vector<uint8_t> before = Bf16Of(master);
    for (float& x : master) x += static_cast<float>(lr) * unit(rng);
    const std::vector<uint8_t> after = Bf16Of(master);
    size_t changed = 0;
    for (size_t i = 0; i < after.size(); i += 2) changed += std::memcmp(&before[i], &after[i], 2) != 0;
    std::vector<uint8_t> random(after.size());
    for (size_t i = 0; i < random.size(); i += 4) {
      const uint32_t x = rng();
      std::memcpy(&random[i], &x, std::min<size_t>(4, random.size() - i));
    }
    ++version;
    full.Sync(w, version, before);
    delta.Sync(w, version, before);
    ++version;
    full_step.push_back(full.Sync(w, version, after));
    const int64_t payload0 = delta.stats.delta_bytes.load(), wire0 = delta.stats.delta_wire_bytes.load();
    delta_step.push_back(delta.Sync(w, version, after));
    step_payload += delta.stats.delta_bytes.load() - payload0;
    step_wire += delta.stats.delta_wire_bytes.load() - wire0;
    ++version;
    full_random.push_back(full.Sync(w, version, random));
    delta_random.push_back(delta.Sync(w, version, random));
    std::printf(
        "  iteration %d: %.2f %% of the bf16 words changed in the step; full %.3f / %.3f s, "
        "delta %.3f / %.3f s (step / random)\n",
        it + 1, 100.0 * double(changed) / double(after.size() / 2), full_step.back(), full_random.back(),
        delta_step.back(), delta_random.back());
  }
  const double ratio = step_payload > 0 ? double(step_wire) / double(step_payload) : 1.0;
  const double speedup = Median(full_step) / Median(delta_step);
  const double random_speedup = Median(full_random) / Median(delta_random);
  const double gb = double(mib) * (1 << 20) * receivers / 1e9;
  std::printf("\n%-14s %12s %12s %10s %12s\n", "versions", "full s", "delta s", "speedup", "wire/bytes");
  std::printf("%-14s %12.3f %12.3f %10.2f %12.4f\n", "small step", Median(full_step), Median(delta_step),
              speedup, ratio);
  std::printf("%-14s %12.3f %12.3f %10.2f %12s\n", "random bytes", Median(full_random), Median(delta_random),
              random_speedup, "raw");
  std::printf("(medians of %d; full sync: %.2f GB/s delivered; raw frames in the random case: %lld)\n", iters,
              gb / Median(full_step), static_cast<long long>(delta.stats.delta_raw_frames.load()));
  std::printf("RESULT delta_bytes_ratio %.4f\n", ratio);
  std::printf("RESULT delta_sync_speedup %.2f\n", speedup);
  std::printf("RESULT delta_random_speedup %.2f\n", random_speedup);
  return 0;
}
