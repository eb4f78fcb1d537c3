#include "runtime/rpc/actor_state.h"

namespace skyrl::rpc {

const char* ActorStateName(v1::ActorState state) {
  switch (state) {
    case v1::ACTOR_PENDING:
      return "PENDING";
    case v1::ACTOR_ALIVE:
      return "ALIVE";
    case v1::ACTOR_RESTARTING:
      return "RESTARTING";
    case v1::ACTOR_DEAD:
      return "DEAD";
    default:
      return "UNKNOWN";
  }
}

}  // namespace skyrl::rpc
