// weight_sync: the weight-sync benchmark.
//
//  1. Plan simulation: realistic models and layouts (dense 32B, 30B-A3B MoE, 1T MoE) planned
//     under the default cost model (900 GB/s NVLink in a node, 400 Gb/s NIC per GPU), printing
//     the planned time next to the lower bound.
//  2. Transport (when built with --transport, see below): our TCP transport against
//     torch.distributed's gloo broadcast and single-stream loopback bandwidth.
//
//   build/bin/weight_sync [--plans-only] [--small]
// Ends with RESULT lines: worst_plan_to_bound (and the transport figures when run).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "weight_sync/plan/model_zoo.h"
#include "weight_sync/plan/planner.h"

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
  if (!small)
    out.push_back({"moe-1T", ws::Moe1T(), ws::Layout::Of(ModelParallel{.tp = 1, .pp = 16, .ep = 16}),
                   ws::Layout::Engines(4, ModelParallel{.tp = 8, .ep = 4,
                                                        .experts = ExpertSharding::kWholeOverAllRanks}),
                   "256 GPUs PP16xEP16 -> 4 engines x (TP8 attention, EP32 experts) (128 GPUs)"});
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  bool small = false;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--small") == 0) small = true;

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
  std::printf("RESULT worst_plan_to_bound %.3f\n", worst);
  return 0;
}
