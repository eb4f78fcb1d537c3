// The head's one scheduler::Cluster, shared by the actor and placement-group managers, and
// the conversions between the tables' protobufs and the scheduler's types.
//
// Every placement decision and every allocation goes through With() under one mutex: that
// is what keeps concurrent creations from double-booking a GPU. Lock order: a manager's own
// mutex first, then this one; code inside With() calls nothing outside the Cluster.
// Safe for concurrent use.
#pragma once

#include <utility>

#include "absl/synchronization/mutex.h"
#include "scheduler/cluster.h"
#include "skyrl/actor_directory.pb.h"
#include "skyrl/node.pb.h"
#include "skyrl/placement_group.pb.h"

namespace skyrl::head {

class ResourceTracker {
 public:
  template <typename F>
  auto With(F&& f) {
    absl::MutexLock lock(&mu_);
    return f(cluster_);
  }
  template <typename F>
  auto With(F&& f) const {
    absl::MutexLock lock(&mu_);
    return f(static_cast<const scheduler::Cluster&>(cluster_));
  }

 private:
  mutable absl::Mutex mu_;
  scheduler::Cluster cluster_ ABSL_GUARDED_BY(mu_);
};

// Table rows to scheduler types. The rows were validated when they came in; a row that no
// longer parses (a newer head's store) yields an empty resource set.
scheduler::NodeSpec ToNodeSpec(const v1::NodeInfo& node);
ResourceSet ToResources(const google::protobuf::Map<std::string, double>& m);
scheduler::Labels ToLabels(const google::protobuf::Map<std::string, std::string>& m);
scheduler::GroupRequest ToGroupRequest(const v1::PlacementGroupInfo& group);

}  // namespace skyrl::head
