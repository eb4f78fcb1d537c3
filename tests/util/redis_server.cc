#include "tests/util/redis_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/util/paths.h"

namespace skyrl::testing {
namespace {

bool Answers(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  if (ok) {
    const char ping[] = "PING\r\n";
    char buf[64] = {};
    ok = ::write(fd, ping, sizeof(ping) - 1) == ssize_t(sizeof(ping) - 1) &&
         ::read(fd, buf, sizeof(buf) - 1) > 0 &&
         (absl::StartsWith(buf, "+PONG") || absl::StartsWith(buf, "-NOAUTH"));
  }
  ::close(fd);
  return ok;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start(const std::string& password,
                                                                bool fsync_always) {
  std::unique_ptr<RedisServer> server(new RedisServer());
  server->dir_ = MakeTempDir("redis");
  server->password_ = password;
  server->fsync_always_ = fsync_always;
  for (int attempt = 0; attempt < 5; ++attempt) {
    absl::StatusOr<int> port = PickFreePort();
    if (!port.ok()) return port.status();
    server->port_ = *port;
    if (absl::Status s = server->Launch(); s.ok()) return server;
  }
  return absl::UnavailableError(absl::StrCat("redis-server did not start; see ", server->dir_, "/redis.log"));
}

RedisServer::~RedisServer() {
  if (process_) process_->Stop(absl::Seconds(2));
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string RedisServer::url() const {
  return password_.empty() ? absl::StrCat("redis://127.0.0.1:", port_)
                           : absl::StrCat("redis://:", password_, "@127.0.0.1:", port_);
}

absl::Status RedisServer::Launch() {
  SpawnOptions o;
  o.argv = {"redis-server",
            "--port",
            absl::StrCat(port_),
            "--bind",
            "127.0.0.1",
            "--dir",
            dir_,
            "--appendonly",
            "yes",
            "--appendfsync",
            fsync_always_ ? "always" : "everysec",
            "--save",
            "",
            "--daemonize",
            "no",
            "--protected-mode",
            "yes"};
  if (!password_.empty()) {
    o.argv.push_back("--requirepass");
    o.argv.push_back(password_);
  }
  o.log_path = dir_ + "/redis.log";
  absl::StatusOr<Subprocess> p = Subprocess::Start(o);
  if (!p.ok()) return p.status();
  process_.emplace(std::move(*p));
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    if (auto exit = process_->TryWait())
      return absl::UnavailableError(absl::StrCat("redis-server exited: ", exit->Describe()));
    if (Answers(port_)) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(20));
  }
  process_->Stop(absl::Seconds(1));
  return absl::DeadlineExceededError("redis-server did not answer within 10 s");
}

void RedisServer::Kill(int sig) {
  if (process_ && process_->running()) {
    process_->Signal(sig).IgnoreError();
    process_->Wait();
  }
}

absl::Status RedisServer::Restart() {
  Kill(SIGKILL);
  return Launch();
}

}  // namespace skyrl::testing
