#include "rl/job/tp_group.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace skyrl::rl {

absl::Status TpGroup::Join(const RoleArgs& args) {
  if (args.world == 1) {
    comm_ = MakeSingleRankCollective();
    return absl::OkStatus();
  }
  if (args.rank == 0) {
    auto listener = TcpListener::Bind("0.0.0.0", 0);
    if (!listener.ok()) return listener.status();
    listener_ = std::move(*listener);
    TcpListener* l = listener_.get();
    const int world = args.world;
    accepted_ = std::async(std::launch::async, [l, world] { return l->Accept(world, absl::Seconds(300)); });
    return absl::OkStatus();
  }
  const std::string& m = args.master;
  int port = 0;
  if (!absl::SimpleAtoi(m.substr(m.rfind(':') + 1), &port))
    return absl::InvalidArgumentError(absl::StrCat("init args: master: bad port in '", m, "'"));
  auto comm =
      ConnectTcpCollective(m.substr(0, m.rfind(':')), port, args.rank, args.world, absl::Seconds(120));
  if (!comm.ok()) return comm.status();
  comm_ = std::move(*comm);
  return absl::OkStatus();
}

absl::Status TpGroup::Complete(absl::string_view who) {
  if (comm_) return absl::OkStatus();
  if (!accepted_.valid()) return absl::InternalError(absl::StrCat(who, ": no collective"));
  auto comm = accepted_.get();
  if (!comm.ok())
    return absl::UnavailableError(absl::StrCat(who, " rank 0: TP group: ", comm.status().message()));
  comm_ = std::move(*comm);
  return absl::OkStatus();
}

}  // namespace skyrl::rl
