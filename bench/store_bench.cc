// store_bench: put and get rates of the Redis metadata store, against redis-benchmark on the
// same server in the same run. Both sides use one connection and no pipelining (-c 1 -P 1),
// which is how the head uses the store, so the ratio measures our client's overhead.
//
//   build/bin/store_bench [--ops N]
// Ends with RESULT lines: store_put_per_s, store_get_per_s, store_batch_put_per_s,
// redis_benchmark_set_per_s, redis_benchmark_get_per_s, store_put_ratio.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "runtime/store/redis/redis_store.h"
#include "tests/util/paths.h"
#include "tests/util/redis_server.h"

namespace {

using skyrl::store::Store;

double Rate(int ops, absl::Duration d) { return ops / absl::ToDoubleSeconds(d); }

// Runs redis-benchmark for one command and returns its requests per second.
double RedisBenchmark(int port, const std::string& test, int ops, const std::string& dir) {
  std::string out = dir + "/redis-benchmark-" + test + ".csv";
  skyrl::SpawnOptions o;
  o.argv = {"redis-benchmark",
            "-h",
            "127.0.0.1",
            "-p",
            std::to_string(port),
            "-t",
            test,
            "-n",
            std::to_string(ops),
            "-c",
            "1",
            "-P",
            "1",
            "-d",
            "64",
            "-r",
            "100000",
            "--csv"};
  o.log_path = out;
  auto p = skyrl::Subprocess::Start(o);
  if (!p.ok() || !p->Wait().ok()) return -1;
  std::ifstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    // "SET","45454.55",...
    std::vector<std::string> cols = absl::StrSplit(line, ',');
    if (cols.size() < 2) continue;
    std::string name(absl::StripPrefix(absl::StripSuffix(cols[0], "\""), "\""));
    std::string rps(absl::StripPrefix(absl::StripSuffix(cols[1], "\""), "\""));
    double v;
    if (absl::EqualsIgnoreCase(name, test) && absl::SimpleAtod(rps, &v)) return v;
  }
  return -1;
}

struct Options {
  int ops = 20000;
};

struct StoreRates {
  double put = 0, get = 0, batch = 0;
};

// Our client's put, get and batched-put rates over `ops` operations each; false when an
// operation fails.
bool MeasureStore(Store& store, const std::string& value, int ops, StoreRates* rates) {
  absl::Time t0 = absl::Now();
  for (int i = 0; i < ops; ++i)
    if (!store.Put("bench", absl::StrCat("key:", i % 100000), value).ok()) return false;
  rates->put = Rate(ops, absl::Now() - t0);

  t0 = absl::Now();
  for (int i = 0; i < ops; ++i)
    if (!store.Get("bench", absl::StrCat("key:", i % 100000)).ok()) return false;
  rates->get = Rate(ops, absl::Now() - t0);

  constexpr int kBatch = 100;
  t0 = absl::Now();
  for (int i = 0; i < ops; i += kBatch) {
    std::vector<skyrl::store::Write> batch;
    for (int j = i; j < i + kBatch && j < ops; ++j)
      batch.push_back(skyrl::store::Write::Put("bench", absl::StrCat("batch:", j), value));
    if (!store.Apply(batch).ok()) return false;
  }
  rates->batch = Rate(ops, absl::Now() - t0);
  return true;
}

void PrintRates(const StoreRates& r, double rb_set, double rb_get) {
  std::printf("%-44s %14s %10s\n", "figure (1 connection, 64-byte values)", "ops/s", "vs redis");
  std::printf("%-44s %14.0f %10.2f\n", "RedisStore::Put (HSET)", r.put, r.put / rb_set);
  std::printf("%-44s %14.0f %10.2f\n", "RedisStore::Get (HGET)", r.get, r.get / rb_get);
  std::printf("%-44s %14.0f %10.2f\n", "RedisStore::Apply, 100 puts per MULTI/EXEC", r.batch,
              r.batch / rb_set);
  std::printf("%-44s %14.0f %10s\n", "redis-benchmark SET -c 1 -P 1", rb_set, "1.00");
  std::printf("%-44s %14.0f %10s\n", "redis-benchmark GET -c 1 -P 1", rb_get, "1.00");
  std::printf("RESULT store_put_per_s %.0f\n", r.put);
  std::printf("RESULT store_get_per_s %.0f\n", r.get);
  std::printf("RESULT store_batch_put_per_s %.0f\n", r.batch);
  std::printf("RESULT redis_benchmark_set_per_s %.0f\n", rb_set);
  std::printf("RESULT redis_benchmark_get_per_s %.0f\n", rb_get);
  std::printf("RESULT store_put_ratio %.3f\n", r.put / rb_set);
}

int Run(const Options& opts) {
  auto server = skyrl::testing::RedisServer::Start("", /*fsync_always=*/false);
  if (!server.ok()) {
    std::fprintf(stderr, "store_bench: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  auto opened = skyrl::store::OpenStore((*server)->url(), "bench");
  if (!opened.ok()) {
    std::fprintf(stderr, "store_bench: %s\n", std::string(opened.status().message()).c_str());
    return 1;
  }
  Store& store = **opened;
  std::string value(64, 'v');  // same payload size as redis-benchmark -d 64

  std::fprintf(stderr, "store_bench: %d ops per figure against %s\n", opts.ops, store.Describe().c_str());
  StoreRates rates;
  if (!MeasureStore(store, value, opts.ops, &rates)) return 1;

  double rb_set = RedisBenchmark((*server)->port(), "set", opts.ops, (*server)->dir());
  double rb_get = RedisBenchmark((*server)->port(), "get", opts.ops, (*server)->dir());
  if (rb_set <= 0 || rb_get <= 0) {
    std::fprintf(stderr, "store_bench: redis-benchmark failed (is redis-tools installed?)\n");
    return 1;
  }
  PrintRates(rates, rb_set, rb_get);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--ops") == 0) o.ops = std::max(100, std::atoi(argv[i + 1]));
  return Run(o);
}
