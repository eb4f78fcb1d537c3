#include "rl/collective/tcp_collective.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace skyrl::rl {
namespace {

constexpr uint32_t kMagic = 0x534b4331;  // "SKC1"
enum Op : uint32_t { kHello = 1, kAllReduce = 2, kBroadcast = 3, kResult = 4, kError = 5 };

// Fixed-size frame header; native byte order (both ends run the same build on one cluster).
struct Header {
  uint32_t magic = kMagic;
  uint32_t op = 0;
  int32_t rank = 0;
  int32_t arg = 0;    // world (hello), root (broadcast)
  int64_t count = 0;  // floats that follow (error: bytes of message)
};

using Clock = std::chrono::steady_clock;

std::string Errno(const char* what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

// Waits for `events` on fd until `deadline`.
absl::Status Wait(int fd, short events, Clock::time_point deadline, absl::string_view what) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return absl::DeadlineExceededError(absl::StrCat(what, ": timed out"));
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno != EINTR) return absl::UnavailableError(absl::StrCat(what, ": ", Errno("poll")));
  }
}

absl::Status SendAll(int fd, const void* data, size_t n, Clock::time_point deadline, absl::string_view what) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    if (auto s = Wait(fd, POLLOUT, deadline, what); !s.ok()) return s;
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat(what, ": ", Errno("send")));
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
  return absl::OkStatus();
}

absl::Status RecvAll(int fd, void* data, size_t n, Clock::time_point deadline, absl::string_view what) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    if (auto s = Wait(fd, POLLIN, deadline, what); !s.ok()) return s;
    ssize_t k = ::recv(fd, p, n, MSG_DONTWAIT);
    if (k == 0) return absl::UnavailableError(absl::StrCat(what, ": peer closed the connection"));
    if (k < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat(what, ": ", Errno("recv")));
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
  return absl::OkStatus();
}

absl::Status RecvHeader(int fd, Header* h, Clock::time_point deadline, absl::string_view what) {
  if (auto s = RecvAll(fd, h, sizeof(*h), deadline, what); !s.ok()) return s;
  if (h->magic != kMagic)
    return absl::DataLossError(absl::StrCat(what, ": not a skyrl collective peer (bad magic)"));
  if (h->count < 0 || h->count > (int64_t{1} << 34)) {
    return absl::DataLossError(absl::StrCat(what, ": bad element count ", h->count));
  }
  return absl::OkStatus();
}

void SetNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

absl::StatusOr<sockaddr_in> Address(const std::string& host, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("host: \"", host, "\" is not an IPv4 address"));
  }
  return a;
}

class TcpCollective final : public Collective {
 public:
  // Rank 0: peers[r] is rank r's socket (peers[0] unused). Others: peers = {fd to rank 0}.
  TcpCollective(int rank, int world, std::vector<int> peers, absl::Duration timeout)
      : rank_(rank), world_(world), peers_(std::move(peers)), timeout_(absl::ToChronoMilliseconds(timeout)) {}
  ~TcpCollective() override {
    for (int fd : peers_) {
      if (fd >= 0) ::close(fd);
    }
  }
  int Rank() const override { return rank_; }
  int WorldSize() const override { return world_; }

  absl::Status AllReduceSum(float* data, int64_t count) override {
    if (count < 0) return absl::InvalidArgumentError("AllReduceSum: count < 0");
    return Run(kAllReduce, 0, data, count);
  }
  absl::Status Broadcast(float* data, int64_t count, int root) override {
    if (count < 0) return absl::InvalidArgumentError("Broadcast: count < 0");
    if (root < 0 || root >= world_) {
      return absl::InvalidArgumentError(absl::StrCat("Broadcast: root ", root, " outside world ", world_));
    }
    return Run(kBroadcast, root, data, count);
  }

 private:
  absl::Status Run(Op op, int root, float* data, int64_t count) {
    if (!broken_.ok())
      return absl::AbortedError(absl::StrCat("collective broken earlier: ", broken_.message()));
    if (world_ == 1) return absl::OkStatus();
    const auto deadline = Clock::now() + timeout_;
    absl::Status s =
        rank_ == 0 ? RunRoot(op, root, data, count, deadline) : RunLeaf(op, root, data, count, deadline);
    // A disagreement is reported to every rank and leaves the streams in step; anything
    // else leaves them in an unknown state.
    if (!s.ok() && s.code() != absl::StatusCode::kFailedPrecondition) broken_ = s;
    return s;
  }

  // The payload a rank sends: all-reduce always, broadcast only from the root.
  static bool Sends(Op op, int root, int rank) { return op == kAllReduce || rank == root; }

  absl::Status RunLeaf(Op op, int root, float* data, int64_t count, Clock::time_point deadline) {
    const int fd = peers_[0];
    const std::string what = absl::StrCat("rank ", rank_, " <-> rank 0");
    Header h;
    h.op = op;
    h.rank = rank_;
    h.arg = root;
    h.count = count;
    if (auto s = SendAll(fd, &h, sizeof(h), deadline, what); !s.ok()) return s;
    if (Sends(op, root, rank_) && count > 0) {
      if (auto s = SendAll(fd, data, count * sizeof(float), deadline, what); !s.ok()) return s;
    }
    Header r;
    if (auto s = RecvHeader(fd, &r, deadline, what); !s.ok()) return s;
    if (r.op == kError) {
      std::string msg(r.count, '\0');
      if (auto s = RecvAll(fd, msg.data(), msg.size(), deadline, what); !s.ok()) return s;
      return absl::FailedPreconditionError(msg);
    }
    if (r.op != kResult || r.count != count)
      return absl::DataLossError(absl::StrCat(what, ": unexpected reply"));
    if (count > 0) return RecvAll(fd, data, count * sizeof(float), deadline, what);
    return absl::OkStatus();
  }

  absl::Status RunRoot(Op op, int root, float* data, int64_t count, Clock::time_point deadline) {
    // Gather every header (and payload) in rank order; read all of them even after a
    // mismatch so that the streams stay aligned for the next operation.
    std::string mismatch;
    std::vector<std::vector<float>> bufs(world_);
    for (int r = 1; r < world_; ++r) {
      const std::string what = absl::StrCat("rank 0 <-> rank ", r);
      Header h;
      if (auto s = RecvHeader(peers_[r], &h, deadline, what); !s.ok()) return s;
      if (Sends(static_cast<Op>(h.op), h.arg, r) && h.count > 0) {
        bufs[r].resize(h.count);
        if (auto s = RecvAll(peers_[r], bufs[r].data(), h.count * sizeof(float), deadline, what); !s.ok())
          return s;
      }
      if ((h.op != op || h.count != count || h.arg != root) && mismatch.empty()) {
        mismatch = absl::StrCat("ranks disagree: rank 0 called op ", op, " (root ", root, ") with ", count,
                                " elements, rank ", r, " op ", h.op, " (root ", h.arg, ") with ", h.count);
      }
    }
    if (!mismatch.empty()) {
      for (int r = 1; r < world_; ++r) {
        Header e;
        e.op = kError;
        e.count = static_cast<int64_t>(mismatch.size());
        const std::string what = absl::StrCat("rank 0 <-> rank ", r);
        if (auto s = SendAll(peers_[r], &e, sizeof(e), deadline, what); !s.ok()) return s;
        if (auto s = SendAll(peers_[r], mismatch.data(), mismatch.size(), deadline, what); !s.ok()) return s;
      }
      return absl::FailedPreconditionError(mismatch);
    }
    if (op == kAllReduce) {
      // The same order as InProcessCollective: ((x0 + x1) + x2) + ...
      for (int r = 1; r < world_; ++r) {
        const float* src = bufs[r].data();
        for (int64_t i = 0; i < count; ++i) data[i] += src[i];
      }
    } else if (root != 0 && count > 0) {
      std::memcpy(data, bufs[root].data(), count * sizeof(float));
    }
    for (int r = 1; r < world_; ++r) {
      const std::string what = absl::StrCat("rank 0 <-> rank ", r);
      Header h;
      h.op = kResult;
      h.count = count;
      if (auto s = SendAll(peers_[r], &h, sizeof(h), deadline, what); !s.ok()) return s;
      if (count > 0) {
        if (auto s = SendAll(peers_[r], data, count * sizeof(float), deadline, what); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

  const int rank_;
  const int world_;
  std::vector<int> peers_;
  const std::chrono::milliseconds timeout_;
  absl::Status broken_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TcpListener>> TcpListener::Bind(const std::string& host, int port) {
  if (port < 0 || port > 65535)
    return absl::InvalidArgumentError(absl::StrCat("port: ", port, " out of range"));
  auto addr = Address(host, port);
  if (!addr.ok()) return addr.status();
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(Errno("socket"));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&*addr), sizeof(*addr)) != 0 || ::listen(fd, 64) != 0) {
    std::string err = Errno("bind/listen");
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("collective listener on ", host, ":", port, ": ", err));
  }
  sockaddr_in bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  return std::unique_ptr<TcpListener>(new TcpListener(fd, ntohs(bound.sin_port)));
}

TcpListener::~TcpListener() { ::close(fd_); }

absl::StatusOr<std::unique_ptr<Collective>> TcpListener::Accept(int world, absl::Duration timeout) {
  if (world < 1) return absl::InvalidArgumentError(absl::StrCat("world: must be >= 1, got ", world));
  const auto deadline = Clock::now() + absl::ToChronoMilliseconds(timeout);
  std::vector<int> peers(world, -1);
  auto fail = [&](absl::Status s) {
    for (int fd : peers) {
      if (fd >= 0) ::close(fd);
    }
    return s;
  };
  for (int joined = 1; joined < world;) {
    if (auto s = Wait(fd_, POLLIN, deadline, absl::StrCat("rank 0 waiting for ", world - joined, " ranks"));
        !s.ok()) {
      return fail(s);
    }
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    SetNoDelay(fd);
    Header h;
    absl::Status s = RecvHeader(fd, &h, deadline, "collective hello");
    if (s.ok() && (h.op != kHello || h.arg != world || h.rank < 1 || h.rank >= world || peers[h.rank] >= 0)) {
      s = absl::FailedPreconditionError(
          absl::StrCat("collective hello: rank ", h.rank, " of world ", h.arg, " does not fit a group of ",
                       world, peers[std::clamp(h.rank, 0, world - 1)] >= 0 ? " (rank taken)" : ""));
    }
    if (!s.ok()) {
      // A stray or confused peer: refuse it and keep waiting for the real ones.
      ::close(fd);
      continue;
    }
    peers[h.rank] = fd;
    ++joined;
  }
  return std::unique_ptr<Collective>(new TcpCollective(0, world, std::move(peers), timeout));
}

absl::StatusOr<std::unique_ptr<Collective>> ConnectTcpCollective(const std::string& host, int port, int rank,
                                                                 int world, absl::Duration timeout) {
  if (world < 2 || rank < 1 || rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank: ", rank, " of world ", world, " cannot connect (rank 0 listens)"));
  }
  auto addr = Address(host, port);
  if (!addr.ok()) return addr.status();
  const auto deadline = Clock::now() + absl::ToChronoMilliseconds(timeout);
  std::string last;
  while (Clock::now() < deadline) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return absl::InternalError(Errno("socket"));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&*addr), sizeof(*addr)) == 0) {
      SetNoDelay(fd);
      Header h;
      h.op = kHello;
      h.rank = rank;
      h.arg = world;
      if (auto s = SendAll(fd, &h, sizeof(h), deadline, "collective hello"); !s.ok()) {
        ::close(fd);
        return s;
      }
      return std::unique_ptr<Collective>(new TcpCollective(rank, world, {fd}, timeout));
    }
    last = Errno("connect");
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("rank ", rank, ": could not reach rank 0 at ", host, ":", port, " (", last, ")"));
}

}  // namespace skyrl::rl
