// Test helpers: exact coverage checks of a plan against the layouts it was made from.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "weight_sync/plan/transfer_planner.h"

namespace skyrl::weight_sync::testing {

inline std::vector<Interval> Merge(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.offset < b.offset; });
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (!out.empty() && out.back().offset + out.back().length == i.offset)
      out.back().length += i.length;
    else
      out.push_back(i);
  }
  return out;
}

inline bool Inside(const Box& inner, const std::vector<Box>& boxes) {
  for (const Box& b : boxes)
    if (Intersect(inner, b) == inner) return true;
  return false;
}

// Empty string when every receiver byte of every kept parameter is covered exactly once by
// transfers from senders that hold it; otherwise the first problem found.
inline std::string CheckCoverage(const Model& model, const Layout& senders, const Layout& receivers,
                                 const Plan& plan, const ParamFilter& filter = {}) {
  auto smap = ShardMap::Build(model, senders);
  auto rmap = ShardMap::Build(model, receivers);
  if (!smap.ok() || !rmap.ok()) return "layouts do not build";
  // (receiver, param) -> intervals received
  std::vector<std::vector<std::vector<Interval>>> got(
      plan.num_receivers, std::vector<std::vector<Interval>>(model.params.size()));
  for (const Transfer& t : plan.transfers) {
    const Param& p = model.params[t.param];
    if (filter && !filter(p)) return absl::StrCat("filtered param ", p.name, " transferred");
    if (!Inside(t.box, smap->BoxesOf(t.param, t.sender)))
      return absl::StrCat("sender ", t.sender, " does not hold ", t.box.DebugString(), " of ", p.name);
    if (!Inside(t.box, rmap->BoxesOf(t.param, t.receiver)))
      return absl::StrCat("receiver ", t.receiver, " does not hold ", t.box.DebugString(), " of ", p.name);
    for (const Interval& i : ToIntervals(ByteShape::Of(p), t.box)) got[t.receiver][t.param].push_back(i);
  }
  for (int r = 0; r < plan.num_receivers; ++r)
    for (int p = 0; p < static_cast<int>(model.params.size()); ++p) {
      std::vector<Interval> want;
      if (!filter || filter(model.params[p]))
        for (const Box& b : rmap->BoxesOf(p, r))
          for (const Interval& i : ToIntervals(ByteShape::Of(model.params[p]), b)) want.push_back(i);
      std::vector<Interval> g = got[r][p];
      std::sort(g.begin(), g.end(), [](const Interval& a, const Interval& b) { return a.offset < b.offset; });
      for (size_t k = 1; k < g.size(); ++k)
        if (g[k - 1].offset + g[k - 1].length > g[k].offset)
          return absl::StrCat("receiver ", r, " gets bytes of ", model.params[p].name, " twice at ",
                              g[k].offset);
      if (Merge(g) != Merge(want))
        return absl::StrCat("receiver ", r, " coverage of ", model.params[p].name, " differs");
    }
  return "";
}

}  // namespace skyrl::weight_sync::testing
