// Renders the cluster for people (`skyrl status`) and for programs (`skyrl list --json`).
#pragma once

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "skyrl/actor_directory.pb.h"
#include "skyrl/node.pb.h"

namespace skyrl::cli {

std::string RenderStatus(const std::string& head, const std::vector<v1::NodeInfo>& nodes,
                         const std::vector<v1::ActorInfo>& actors, absl::Time now);
std::string RenderActorsTable(const std::vector<v1::ActorInfo>& actors);
std::string RenderActorsJson(const std::vector<v1::ActorInfo>& actors);
// `actors` (may be empty) gives each node's used resources: those of its PENDING and ALIVE actors.
std::string RenderNodesTable(const std::vector<v1::NodeInfo>& nodes, absl::Time now,
                             const std::vector<v1::ActorInfo>& actors = {});
std::string RenderNodesJson(const std::vector<v1::NodeInfo>& nodes);

}  // namespace skyrl::cli
