// A job driver for the job tests: connects with SKYRL_ADDRESS and SKYRL_TOKEN (as the head
// gives them), creates an actor named "attached" and a detached one named "detached", says
// "ready", and waits to be stopped.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "runtime/client/client.h"

int main() {
  const char* address = std::getenv("SKYRL_ADDRESS");
  const char* token = std::getenv("SKYRL_TOKEN");
  if (!address || !token) {
    std::fprintf(stderr, "test-driver: SKYRL_ADDRESS and SKYRL_TOKEN must be set\n");
    return 2;
  }
  auto client = skyrl::Client::Connect(address, token);
  if (!client.ok()) {
    std::fprintf(stderr, "test-driver: %s\n", std::string(client.status().message()).c_str());
    return 3;
  }
  for (bool detached : {false, true}) {
    skyrl::v1::ActorSpec spec = skyrl::ActorSpecFor("echo");
    spec.set_name(detached ? "detached" : "attached");
    spec.set_detached(detached);
    auto a = (*client)->CreateActor(spec);
    if (!a.ok()) {
      std::fprintf(stderr, "test-driver: create %s: %s\n", spec.name().c_str(),
                   std::string(a.status().message()).c_str());
      return 4;
    }
  }
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) pause();
}
