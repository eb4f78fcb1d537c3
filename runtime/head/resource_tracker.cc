#include "runtime/head/resource_tracker.h"

namespace skyrl::head {

ResourceSet ToResources(const google::protobuf::Map<std::string, double>& m) {
  absl::StatusOr<ResourceSet> r = ResourceSet::FromMap({m.begin(), m.end()});
  return r.ok() ? *r : ResourceSet();
}

scheduler::Labels ToLabels(const google::protobuf::Map<std::string, std::string>& m) {
  return scheduler::Labels(m.begin(), m.end());
}

scheduler::NodeSpec ToNodeSpec(const v1::NodeInfo& node) {
  return scheduler::NodeSpec{node.node_id(), ToResources(node.resources_total()), ToLabels(node.labels()),
                             std::vector<int>(node.gpu_ids().begin(), node.gpu_ids().end())};
}

scheduler::GroupRequest ToGroupRequest(const v1::PlacementGroupInfo& group) {
  scheduler::GroupRequest r;
  r.name = group.spec().name().empty() ? group.placement_group_id() : group.spec().name();
  for (const v1::Bundle& b : group.spec().bundles())
    r.bundles.push_back(scheduler::Demand{ToResources(b.resources()), ToLabels(b.label_selector())});
  switch (group.spec().strategy()) {
    case v1::SPREAD:
      r.strategy = scheduler::Strategy::kSpread;
      break;
    case v1::STRICT_PACK:
      r.strategy = scheduler::Strategy::kStrictPack;
      break;
    case v1::STRICT_SPREAD:
      r.strategy = scheduler::Strategy::kStrictSpread;
      break;
    default:
      r.strategy = scheduler::Strategy::kPack;
      break;
  }
  r.domain_label = group.spec().domain_label();
  r.affinity_group = group.spec().affinity_group_id();
  return r;
}

}  // namespace skyrl::head
