#include "runtime/worker/fork_server.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace skyrl::worker {
namespace {

// The wire (both ways): a 4-byte little-endian length, then that many bytes. A request is
// fields separated by NUL, each a tag and its text: 'a' an argv word, 'e' "NAME=value", 'c' the
// working directory, 'l' the log path. A reply is "pid <n>" or "error <why>".
constexpr size_t kMaxFrame = 64 << 20;

std::string Frame(const std::string& payload) {
  std::string out(4, '\0');
  const uint32_t n = static_cast<uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + payload;
}

absl::Status AddField(std::string& request, char tag, const std::string& text, absl::string_view what) {
  if (text.find('\0') != std::string::npos)
    return absl::InvalidArgumentError(absl::StrCat("fork server: ", what, " contains a NUL byte"));
  if (!request.empty()) request.push_back('\0');
  request.push_back(tag);
  request.append(text);
  return absl::OkStatus();
}

}  // namespace

absl::Status SetChildSubreaper() {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
    return absl::InternalError(absl::StrCat("prctl(PR_SET_CHILD_SUBREAPER): ", strerror(errno)));
  return absl::OkStatus();
}

bool ForkServerSuits(const std::map<std::string, std::string>& env) {
  for (const auto& [name, value] : env) {
    if (absl::StartsWith(name, "PYTHON") && name != "PYTHONPATH") return false;
    if (absl::StartsWith(name, "LD_") || absl::StartsWith(name, "MALLOC_")) return false;
    if (absl::StrContains(name, "NUM_THREADS") || absl::StartsWith(name, "OPENBLAS_") ||
        absl::StartsWith(name, "GOTO") || absl::StartsWith(name, "OMP_") || absl::StartsWith(name, "MKL_"))
      return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<ForkServer>> ForkServer::Start(ForkServerOptions options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("fork server: argv is empty");
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return absl::InternalError(absl::StrCat("fork server: socketpair: ", strerror(errno)));
  SpawnOptions spawn;
  spawn.argv = std::move(options.argv);
  spawn.argv.push_back("--fork-server");
  spawn.argv.push_back("3");
  spawn.env_set = std::move(options.env);
  spawn.log_path = std::move(options.log_path);
  spawn.pass_fd = fds[1];
  absl::StatusOr<Subprocess> process = Subprocess::Start(spawn);
  ::close(fds[1]);
  if (!process.ok()) {
    ::close(fds[0]);
    return process.status();
  }
  return std::unique_ptr<ForkServer>(new ForkServer(std::move(*process), fds[0], options.reply_timeout));
}

ForkServer::ForkServer(Subprocess process, int fd, absl::Duration reply_timeout)
    : process_(std::move(process)), pid_(process_.pid()), fd_(fd), reply_timeout_(reply_timeout) {}

ForkServer::~ForkServer() {
  absl::MutexLock lock(&mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  process_.Stop(absl::Seconds(1));
}

bool ForkServer::usable() const {
  absl::MutexLock lock(&mu_);
  return !failed_;
}

absl::StatusOr<std::string> ForkServer::Exchange(const std::string& request) {
  const absl::Time deadline = absl::Now() + reply_timeout_;
  auto fail = [this](absl::string_view why) {
    failed_ = true;
    // Whatever it was doing, it is not asked again; a fork it may still make would be an
    // actor nobody tracks, so it goes now.
    process_.Signal(SIGKILL).IgnoreError();
    process_.WaitFor(absl::Seconds(1));
    return absl::UnavailableError(absl::StrCat("fork server (pid ", pid_, "): ", why));
  };
  const std::string out = Frame(request);
  for (size_t sent = 0; sent < out.size();) {
    ssize_t n = ::send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(absl::StrCat("cannot send: ", strerror(errno)));
    sent += static_cast<size_t>(n);
  }
  std::string in;
  size_t want = 4;
  bool header = true;
  while (in.size() < want) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) return fail(absl::StrCat("no answer within ", absl::FormatDuration(reply_timeout_)));
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return fail(absl::StrCat("poll: ", strerror(errno)));
    if (r == 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, std::min(sizeof(buf), want - in.size()), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return fail("it exited");
    if (n < 0) return fail(absl::StrCat("cannot read: ", strerror(errno)));
    in.append(buf, static_cast<size_t>(n));
    if (header && in.size() == 4) {
      uint32_t len = 0;
      for (int i = 0; i < 4; ++i) len |= static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
      if (len > kMaxFrame) return fail(absl::StrCat("a reply of ", len, " bytes"));
      header = false;
      in.clear();
      want = len;
    }
  }
  return in;
}

absl::StatusOr<pid_t> ForkServer::Fork(const SpawnOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("fork server: argv is empty");
  std::string request;
  for (const std::string& word : options.argv)
    if (absl::Status s = AddField(request, 'a', word, "an argv word"); !s.ok()) return s;
  for (const std::string& kv : ChildEnvironment(options))
    if (absl::Status s = AddField(request, 'e', kv, "an environment variable"); !s.ok()) return s;
  if (absl::Status s = AddField(request, 'c', options.working_dir, "the working directory"); !s.ok())
    return s;
  if (absl::Status s = AddField(request, 'l', options.log_path, "the log path"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (failed_ || fd_ < 0)
    return absl::UnavailableError(absl::StrCat("fork server (pid ", pid_, ") has failed"));
  absl::StatusOr<std::string> reply = Exchange(request);
  if (!reply.ok()) return reply.status();
  int pid = 0;
  if (absl::StartsWith(*reply, "pid ") && absl::SimpleAtoi(absl::string_view(*reply).substr(4), &pid) &&
      pid > 0)
    return static_cast<pid_t>(pid);
  if (absl::StartsWith(*reply, "error "))
    return absl::InternalError(absl::StrCat("fork server: ", absl::string_view(*reply).substr(6)));
  failed_ = true;
  return absl::UnavailableError(absl::StrCat("fork server (pid ", pid_, "): a reply it should not give: \"",
                                             reply->substr(0, 200), "\""));
}

}  // namespace skyrl::worker
