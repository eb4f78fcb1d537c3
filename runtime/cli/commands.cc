#include "runtime/cli/commands.h"

#include <iostream>

#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"

namespace skyrl::cli {

absl::StatusOr<std::string> HeadToken(const GlobalOptions& global) {
  if (absl::Status s = rpc::ValidateAddress("--address", global.address); !s.ok()) return s;
  return rpc::LoadToken(global.token_file, false);
}

int Fail(const absl::Status& s, int code) {
  std::cerr << "skyrl: " << s.message() << "\n";
  return code;
}

}  // namespace skyrl::cli
