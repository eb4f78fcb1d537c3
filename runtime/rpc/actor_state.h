// One printable name per actor state: "PENDING", "ALIVE", "RESTARTING", "DEAD".
#pragma once

#include "skyrl/actor_directory.pb.h"

namespace skyrl::rpc {

const char* ActorStateName(v1::ActorState state);

}  // namespace skyrl::rpc
