// skyrl-actor-host-rl: the actor host with the RL roles. trainer_actor.cc, generator_actor.cc,
// reward_actor.cc and reference_actor.cc are compiled into this binary, so their registrations
// are kept. The worker runs it for ActorSpec.host = "rl".
#include "runtime/actor/host.h"

int main(int argc, char** argv) { return skyrl::RunActorHost(argc, argv); }
