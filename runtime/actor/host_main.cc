// skyrl-actor-host with the built-in actors (builtin_actors.cc is compiled into this binary).
#include "runtime/actor/host.h"

int main(int argc, char** argv) { return skyrl::RunActorHost(argc, argv); }
