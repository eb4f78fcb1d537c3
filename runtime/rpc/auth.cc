#include "runtime/rpc/auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/common/logging.h"

namespace skyrl::rpc {
namespace {

absl::StatusOr<std::string> ReadTokenFile(const std::string& path, absl::string_view source) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(source, ": cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  std::string token(absl::StripAsciiWhitespace(text.str()));
  if (absl::Status s = ValidateToken(token); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat(source, " (", path, "): ", s.message()));
  return token;
}

absl::StatusOr<std::string> GenerateToken(const std::string& path) {
  std::string dir = path.substr(0, path.rfind('/'));
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", strerror(errno)));
  unsigned char bytes[32];
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  if (!urandom.read(reinterpret_cast<char*>(bytes), sizeof(bytes)))
    return absl::InternalError("cannot read /dev/urandom");
  std::string token =
      absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(bytes), sizeof(bytes)));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return ReadTokenFile(path, "token file");  // another head won the race
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", strerror(errno)));
  }
  std::string line = token + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == ssize_t(line.size());
  ::close(fd);
  if (!ok) return absl::InternalError(absl::StrCat("cannot write ", path));
  spdlog::info("generated a new cluster token in {} (mode 0600)", path);
  return token;
}

}  // namespace

std::string DefaultTokenPath() {
  const char* home = std::getenv("HOME");
  return absl::StrCat(home && *home ? home : "/tmp", "/.skyrl/token");
}

absl::Status ValidateToken(absl::string_view token) {
  if (token.size() < 16 || token.size() > 512)
    return absl::InvalidArgumentError(absl::StrCat("token must be 16-512 characters, got ", token.size()));
  for (char c : token)
    if (c <= ' ' || c > '~')
      return absl::InvalidArgumentError("token must be printable ASCII without spaces");
  return absl::OkStatus();
}

absl::StatusOr<std::string> LoadToken(const std::string& token_file, bool create_if_missing) {
  if (!token_file.empty()) return ReadTokenFile(token_file, "--token-file");
  if (const char* env = std::getenv("SKYRL_TOKEN"); env && *env) {
    std::string token(absl::StripAsciiWhitespace(env));
    if (absl::Status s = ValidateToken(token); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat("$SKYRL_TOKEN: ", s.message()));
    return token;
  }
  std::string path = DefaultTokenPath();
  absl::StatusOr<std::string> token = ReadTokenFile(path, "token file");
  if (token.ok() || !absl::IsNotFound(token.status()) || !create_if_missing) {
    if (absl::IsNotFound(token.status()))
      return absl::NotFoundError(
          absl::StrCat("no cluster token: pass --token-file, set $SKYRL_TOKEN, or run on the head's machine "
                       "(",
                       path, " is missing)"));
    return token;
  }
  return GenerateToken(path);
}

bool TokenMatches(absl::string_view given, absl::string_view token) {
  if (given.size() != token.size() || token.empty()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < token.size(); ++i) diff |= uint8_t(given[i] ^ token[i]);
  return diff == 0;
}

grpc::Status TokenAuth::Check(const grpc::ServerContextBase* context) const {
  const auto& md = context->client_metadata();
  auto it = md.find(kAuthMetadataKey);
  absl::string_view given;
  if (it != md.end()) given = absl::string_view(it->second.data(), it->second.size());
  if (absl::ConsumePrefix(&given, "Bearer ") && TokenMatches(given, token_)) return grpc::Status::OK;
  spdlog::warn("rejected a call from {}: {} token", context->peer(), it == md.end() ? "missing" : "wrong");
  return grpc::Status(
      grpc::StatusCode::UNAUTHENTICATED,
      it == md.end() ? "missing cluster token (authorization metadata)" : "wrong cluster token");
}

void AttachToken(grpc::ClientContext* context, const std::string& token) {
  context->AddMetadata(kAuthMetadataKey, "Bearer " + token);
}

void PrepareCall(grpc::ClientContext* context, const std::string& token, absl::Duration timeout) {
  AttachToken(context, token);
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

}  // namespace skyrl::rpc
