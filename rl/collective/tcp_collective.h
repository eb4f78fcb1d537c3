// A Collective across processes over TCP (POSIX sockets, poll for deadlines): a star through
// rank 0. Every operation is a gather to rank 0 and a reply from it: for AllReduceSum rank 0
// sums the buffers in rank order (0, 1, ..., n-1), exactly as InProcessCollective does, and
// sends the result to everyone, so all ranks, and both implementations, get the same bits.
// For TP groups of 2-8 ranks on one node the star costs about what a ring does; a ring for
// larger groups can come later behind the same interface.
//
// Set-up: rank 0 binds a listener (port 0 = any free port) and publishes its port out of band
// (the job passes it through the actor's constructor); ranks 1..n-1 connect and say who they
// are; TcpListener::Accept returns rank 0's collective once all have arrived.
//
// Failures: every socket wait has the deadline `timeout`; a timeout is DeadlineExceeded, a
// peer that closes or sends garbage is Unavailable / DataLoss, mismatched operations fail on
// every rank with FailedPrecondition. After any failure but the last, the collective is
// broken and later calls return Aborted at once (never hang).
//
// Thread safety: one thread per Collective, as for every Collective. TcpListener is used by
// one thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rl/collective/collective.h"

namespace skyrl::rl {

class TcpListener {
 public:
  // Binds and listens on host:port (port 0: the kernel picks one).
  static absl::StatusOr<std::unique_ptr<TcpListener>> Bind(const std::string& host, int port);
  ~TcpListener();
  int port() const { return port_; }
  // Waits for ranks 1..world-1 (any order) and returns rank 0's collective.
  absl::StatusOr<std::unique_ptr<Collective>> Accept(int world, absl::Duration timeout);

 private:
  TcpListener(int fd, int port) : fd_(fd), port_(port) {}
  int fd_;
  int port_;
};

// Rank `rank` (>= 1) of `world`: connects to rank 0 at host:port, retrying until `timeout`
// (rank 0 may not be listening yet).
absl::StatusOr<std::unique_ptr<Collective>> ConnectTcpCollective(const std::string& host, int port, int rank,
                                                                 int world, absl::Duration timeout);

}  // namespace skyrl::rl
