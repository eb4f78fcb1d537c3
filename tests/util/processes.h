// Actor processes of one test cluster, found in /proc: every process whose environment has
// HOME=<home> (the cluster's scratch folder, which its daemons pass on) and SKYRL_ACTOR_ID.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace skyrl::testing {

// actor id -> pids of its live (not zombie) processes.
std::map<std::string, std::vector<int>> ActorProcessesWithHome(const std::string& home);

}  // namespace skyrl::testing
