// The cluster token. Every RPC to the head, a worker or an actor carries it in the
// "authorization: Bearer <token>" metadata; a missing or wrong token is UNAUTHENTICATED.
//
// Where the token comes from, first match wins:
//   1. --token-file F (daemons and the CLI),
//   2. $SKYRL_TOKEN,
//   3. ~/.skyrl/token, which the head creates on its first start (mode 0600, folder 0700)
//      when none of the above exists. Clients on the same machine find it there.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace skyrl::rpc {

inline constexpr char kAuthMetadataKey[] = "authorization";

// The default token path: $HOME/.skyrl/token.
std::string DefaultTokenPath();

// Finds the token as described above. With `create_if_missing` (the head), generates a new
// random token into the default path when there is none. Errors name the source.
absl::StatusOr<std::string> LoadToken(const std::string& token_file, bool create_if_missing);

// Checks a token's form: 16-512 printable ASCII characters without spaces.
absl::Status ValidateToken(absl::string_view token);

// Whether `given` is `token`, compared in constant time: the time taken says nothing about how
// much of a guess was right. For every place a token is checked (RPCs, the dashboard).
bool TokenMatches(absl::string_view given, absl::string_view token);

// Server side. Safe for concurrent use.
class TokenAuth {
 public:
  explicit TokenAuth(std::string token) : token_(std::move(token)) {}
  // OK, or UNAUTHENTICATED (logged with the peer and method, never the token).
  // Takes both the synchronous and the callback API's server contexts.
  grpc::Status Check(const grpc::ServerContextBase* context) const;

 private:
  std::string token_;
};

// Client side: attaches the token to one call.
void AttachToken(grpc::ClientContext* context, const std::string& token);
// Client side: the token and a deadline `timeout` from now, for one call.
void PrepareCall(grpc::ClientContext* context, const std::string& token, absl::Duration timeout);

}  // namespace skyrl::rpc
