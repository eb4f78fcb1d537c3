#include "rl/job/role_env.h"

#include <torch/torch.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "weight_sync/kv_rendezvous.h"

namespace skyrl::rl {
namespace {

struct Cluster {
  const char* address;
  const char* token;
};
absl::StatusOr<Cluster> FromEnvironment(absl::string_view what) {
  const char* address = std::getenv("SKYRL_ADDRESS");
  const char* token = std::getenv("SKYRL_TOKEN");
  if (!address || !token)
    return absl::FailedPreconditionError(absl::StrCat(what, ": SKYRL_ADDRESS/SKYRL_TOKEN unset"));
  return Cluster{address, token};
}

}  // namespace

absl::StatusOr<JobSetup> RoleSetup(const RoleArgs& args) {
  auto config = ParseJobConfig(args.config_yaml, "init args config");
  if (!config.ok()) return config.status();
  auto setup = MakeJobSetup(*config);
  if (!setup.ok()) return setup.status();
  torch::set_num_threads(config->trainer.num_threads);
  return setup;
}

absl::StatusOr<std::unique_ptr<weight_sync::Rendezvous>> ConnectRendezvous(absl::string_view what) {
  absl::StatusOr<Cluster> c = FromEnvironment(what);
  if (!c.ok()) return c.status();
  auto kv = weight_sync::KvRendezvous::Connect(c->address, c->token);
  if (!kv.ok()) return kv.status();
  return std::unique_ptr<weight_sync::Rendezvous>(std::move(*kv));
}

absl::StatusOr<std::unique_ptr<Client>> ConnectClient(absl::string_view what) {
  absl::StatusOr<Cluster> c = FromEnvironment(what);
  if (!c.ok()) return c.status();
  ClientOptions o;
  o.call_timeout = absl::Seconds(60);
  o.restart_wait = absl::Seconds(60);
  return Client::Connect(c->address, c->token, o);
}

}  // namespace skyrl::rl
