// The weight check of a catalog row (`skyrl plan --model NAME --verify`): the row's architecture
// scaled down to a few MiB with the same structure (ScaleDown: parameter names, kinds, fusions,
// split rules, expert structure, MTP and vision parts, dtypes), synced from the plan's trainer
// layout to its engines' over the TCP transport, every rank its own process on this machine,
// three versions in a row with the row's filters (MTP dropped unless enabled, a frozen vision
// tower, LoRA only). Each engine rank's shard must equal, byte for byte, what vLLM's sharding
// rules give it of the full model (cut here from the parameter's split dimension, fused blocks,
// head rows and expert index, without weight_sync's boxes); filtered parameters must not arrive.
//
// Where the plan's rollouts are fp8 and the trainer is Megatron, each trainer rank converts its
// own shard to fp8 with 32-element E8M0 scales (weight_sync/convert/fp8_model.h) and engines must
// hold the fp8 data and scales of their bf16 piece, byte for byte (the same as the slice of the
// whole tensor converted at once). An FSDP trainer's flat shards cut the blocks, so there bf16
// goes, as the catalog's sync assumes (engines quantize on arrival).
//
// Forks one process per rank: call it from a process with no other threads running.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "catalog/capacity_planner.h"
#include "weight_sync/plan/model.h"

namespace skyrl::catalog {

// `a` with the same structure and small dimensions: at most a few layers (at least the plan's
// pipeline stages; hybrids keep each mixer kind, "first k dense" keeps a dense layer), hidden
// 128, head dims 32 (MLA ranks 64), the same head counts, FFN and expert widths of 32 per TP
// rank, an expert count that the plan's expert spreads divide as the real one does, a vocabulary
// of 512, one MTP layer and a one-block vision tower where the model has them.
Architecture ScaleDown(const Architecture& a, const Plan& plan);

struct VerifyOptions {
  int versions = 3;
  absl::Duration io_timeout = absl::Seconds(30);  // per transfer step; the whole check gets 4x
  // Tests: edits the model the sync runs on, not the one the check expects (a wrong split rule
  // must fail the check, naming the parameter).
  std::function<void(weight_sync::Model&)> corrupt;
};

struct VerifyResult {
  bool verified = false;
  std::string failure;       // why not: the engine rank, version and parameter, or the rank that failed
  std::string failed_param;  // the first parameter whose bytes differ, when that is why
  std::string scaled;        // "4 layers, hidden 128, 16 experts, 3.2 MiB"
  int senders = 0, receivers = 0;
  int params = 0, synced_params = 0;
  int64_t synced_bytes = 0;  // one version, every engine rank
  int versions = 0;
  double seconds = 0;
};

// InvalidArgument when the plan's layouts cannot be expressed for the scaled model; a check
// that ran returns its result (verified or not).
absl::StatusOr<VerifyResult> VerifyWeightSync(const Plan& plan, const VerifyOptions& options = {});

// A row of the supported-models tables as `skyrl plan --list --verify` reports it: its reference
// model, in its reference mode and placement, plans at the stated minimum; is refused on every
// cluster one step below (the model's own minimum when the table's is conservative); and its
// weights arrive intact at that plan (VerifyWeightSync).
struct RowCheck {
  std::string family, table, model, mode, minimum;
  bool plans_at_minimum = false;
  std::string plan_error;  // why not
  bool refused_below = false;
  std::string below;  // the clusters tried, or why the check could not run
  bool weights_verified = false;
  std::string weights;  // FormatVerifyResult, or why no check ran
};
RowCheck CheckRow(const Catalog& catalog, const Row& row);
// One line per row, then a line per failure.
std::string RenderRowChecks(const std::vector<RowCheck>& rows);

// "weights verified: 8 trainer ranks -> 2 engine ranks, 3 versions of 4 layers, hidden 128, ...
// (3.1 MiB per version) in 0.8 s" or "weights NOT verified: <failure>".
std::string FormatVerifyResult(const VerifyResult& r);

}  // namespace skyrl::catalog
