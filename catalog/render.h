// Rendering of plans and of the catalog: a human table and JSON (nlohmann-json). Pure.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "catalog/capacity_planner.h"
#include "catalog/catalog.h"

namespace skyrl::catalog {

std::string RenderPlanText(const Plan& p);
std::string RenderPlanJson(const Plan& p);  // one JSON object, pretty-printed

// A refusal as JSON: {"ok": false, "code": "RESOURCE_EXHAUSTED", "error": "..."}.
std::string RenderErrorJson(const absl::Status& s);

// Every model: row, sizes counted, support, the row's stated minimum and the model's own
// minimum on the row's GPU type (the row's reference mode and placement; "-" when none up to
// 64x8), from MinimumHardware.
std::string RenderCatalogText(const Catalog& c);
std::string RenderCatalogJson(const Catalog& c);

}  // namespace skyrl::catalog
