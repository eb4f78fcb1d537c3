// Renders the cluster for people (`skyrl status`) and for programs (`skyrl list --json`,
// `skyrl job list --json`, and the head's dashboard, which serves the same JSON).
#pragma once

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "skyrl/actor_directory.pb.h"
#include "skyrl/job.pb.h"
#include "skyrl/node.pb.h"
#include "skyrl/placement_group.pb.h"

namespace skyrl::views {

// Nodes (total and used), placement groups, actors by state, pending demands with their
// reasons, and recent failures.
std::string RenderStatus(const std::string& head, const std::vector<v1::NodeInfo>& nodes,
                         const std::vector<v1::ActorInfo>& actors,
                         const std::vector<v1::PlacementGroupInfo>& groups, absl::Time now);
std::string RenderGroupsTable(const std::vector<v1::PlacementGroupInfo>& groups);
std::string RenderGroupsJson(const std::vector<v1::PlacementGroupInfo>& groups);
std::string RenderActorsTable(const std::vector<v1::ActorInfo>& actors);
std::string RenderActorsJson(const std::vector<v1::ActorInfo>& actors);
// `actors` and `groups` (may be empty) give each node's used resources: its placed bundles,
// and its PENDING and ALIVE actors outside placement groups.
std::string RenderNodesTable(const std::vector<v1::NodeInfo>& nodes, absl::Time now,
                             const std::vector<v1::ActorInfo>& actors = {},
                             const std::vector<v1::PlacementGroupInfo>& groups = {});
// "used" per node as in the table.
std::string RenderNodesJson(const std::vector<v1::NodeInfo>& nodes,
                            const std::vector<v1::ActorInfo>& actors = {},
                            const std::vector<v1::PlacementGroupInfo>& groups = {});
// "SUCCEEDED" for JOB_SUCCEEDED.
std::string JobStateName(v1::JobState s);
std::string RenderJobJson(const v1::JobInfo& job);
std::string RenderJobsJson(const std::vector<v1::JobInfo>& jobs);

}  // namespace skyrl::views
