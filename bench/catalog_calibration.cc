// Calibration aid for the catalog's memory model, not a benchmark of speed: for every row of
// models/, which (size, mode, placement) readings plan at the row's stated minimum and fail on
// every cluster below it. A reading that does both agrees with the row's stated minimum.
//
//   build/bin/catalog_calibration [--models-dir models]
//
// Other assumptions without rebuilding: SKYRL_CAL_SEQ (sequence length), SKYRL_CAL_KV (KV
// sequences per engine), SKYRL_CAL_USABLE (usable memory fraction), SKYRL_CAL_OFFLOAD=1 (CPU
// optimizer for every row). Ends with RESULT catalog_rows_agreeing <rows with at least one
// agreeing reading>.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "CLI/CLI.hpp"
#include "catalog/capacity_planner.h"
#include "catalog/catalog.h"

int main(int argc, char** argv) {
  using namespace skyrl::catalog;
  CLI::App app{"catalog_calibration: which readings of each catalog row agree with its stated minimum"};
  std::string models_dir = "models";
  app.add_option("--models-dir", models_dir, "the catalog (models/ of the checkout)");
  CLI11_PARSE(app, argc, argv);
  absl::StatusOr<Catalog> cat = Catalog::LoadDir(models_dir);
  if (!cat.ok()) {
    std::fprintf(stderr, "catalog_calibration: %s\n", std::string(cat.status().message()).c_str());
    return 1;
  }
  PlanRequest opts;
  if (const char* v = std::getenv("SKYRL_CAL_SEQ")) opts.assumptions.seq_len = std::atoll(v);
  if (const char* v = std::getenv("SKYRL_CAL_KV")) opts.assumptions.kv_sequences = std::atoi(v);
  if (const char* v = std::getenv("SKYRL_CAL_USABLE")) opts.assumptions.usable_fraction = std::atof(v);
  if (const char* v = std::getenv("SKYRL_CAL_OFFLOAD"))
    opts.assumptions.optimizer_offload = std::atoi(v) != 0;
  const PlanRequest base = opts;
  int agreeing_rows = 0;
  for (const Row& r : cat->rows()) {
    // The row's training recipe (reference.training_precision, optimizer_state) is part of its
    // reading; LoRA ignores it.
    opts = base;
    UseReferenceRecipe(r, &opts.assumptions);
    Cluster min = StatedMinimum(*cat, r);
    std::string line = r.family + " @" + min.shape.ToString() + ":";
    bool any = false;
    for (Placement pl : {Placement::kSeparate, Placement::kColocated})
      for (Mode mode : {Mode::kFull, Mode::kLora}) {
        if (r.SupportFor(mode) == Support::kNotWorking) continue;
        for (const ModelEntry& m : r.models) {
          if (!PlanOn(*cat, r, m, mode, min, pl, opts).ok()) continue;
          bool below_fits = false;
          for (const Cluster& b : BelowMinimum(*cat, min))
            below_fits |= PlanOn(*cat, r, m, mode, b, pl, opts).ok();
          if (below_fits) continue;
          line +=
              " [" + m.name + " " + std::string(ModeName(mode)) + " " + std::string(PlacementName(pl)) + "]";
          any = true;
        }
      }
    agreeing_rows += any;
    std::printf("%s\n", line.c_str());
  }
  std::printf("RESULT catalog_rows_agreeing %d\n", agreeing_rows);
  return 0;
}
