// skyrl-actor-host-rl: the actor host with the RL roles (rl_actors.cc is compiled into this
// binary, so its registrations are kept). The worker runs it for ActorSpec.host = "rl".
#include "runtime/actor/host.h"

int main(int argc, char** argv) { return skyrl::RunActorHost(argc, argv); }
