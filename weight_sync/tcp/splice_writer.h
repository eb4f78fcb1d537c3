// Zero-copy sending for the TCP transport (Linux): vmsplice(2) maps the caller's pages into a
// pipe without copying, and splice(2) moves those page references from the pipe into the
// socket, so the socket's buffers point at the shard itself. On loopback the receiver's read
// is then the only copy of each byte (a write(2) costs a second one, user -> socket buffer);
// a NIC DMAs straight from the referenced pages.
//
// Contract (the caller's bytes): the kernel holds references to the caller's pages, not a
// copy, until the receiver has read (and acknowledged) them. The bytes must therefore not
// change until the peer confirmed them; the transport's Send guarantees this by returning
// only after every receiver acknowledged the whole version. After a failed Send the memory
// stays valid (the kernel's page references keep it alive), and bytes already queued may
// still be read later by a receiver that stalled; tcp_transport.h says what that means for
// callers.
//
// Fallback: when the kernel refuses vmsplice or splice for this memory or socket (EINVAL,
// ENOSYS, EOPNOTSUPP, EPERM, or no pipe could be made), the writer drains what it already put
// in the pipe through ordinary writes and copies from then on (zero_copy() turns false). A
// writer made with zero_copy = false copies from the start: it is the transport's one send
// path either way.
//
// Works on TCP and on Unix-domain stream sockets (the transport's same-host path), which both
// take spliced pages.
//
// Threads: one thread drives a writer and its one Connection; not safe for concurrent use. The
// thread must block SIGPIPE (splice, unlike send with MSG_NOSIGNAL, raises it when the peer is
// gone); see BlockSigpipeInThisThread.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <functional>
#include <utility>
#include <vector>

#include "weight_sync/tcp/connection.h"

namespace skyrl::weight_sync::tcp_internal {

// The two system calls, injectable so tests can make the kernel refuse or cut calls short.
// Each returns what the system call returns and leaves errno set on failure.
struct SpliceCalls {
  std::function<ssize_t(int pipe_w, const iovec* iov, size_t count, unsigned flags)> vmsplice =
      [](int fd, const iovec* iov, size_t n, unsigned flags) { return ::vmsplice(fd, iov, n, flags); };
  std::function<ssize_t(int pipe_r, int socket, size_t len, unsigned flags)> splice =
      [](int in, int out, size_t len, unsigned flags) {
        return ::splice(in, nullptr, out, nullptr, len, flags);
      };
};

// Blocks SIGPIPE for the calling thread only (its pending SIGPIPEs die with the thread).
inline void BlockSigpipeInThisThread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// The pipe size the writer asks for: the system's limit (fs.pipe-max-size, 1 MiB by default),
// at most kMaxPipeBytes. Bigger pipes mean fewer system calls per byte.
inline int64_t PipeBytesWanted() {
  static constexpr int64_t kMaxPipeBytes = int64_t{1} << 20;
  static const int64_t wanted = [] {
    int64_t limit = 0;
    std::ifstream("/proc/sys/fs/pipe-max-size") >> limit;
    return limit > 0 ? std::min(limit, kMaxPipeBytes) : int64_t{64} << 10;
  }();
  return wanted;
}

class SpliceWriter {
 public:
  explicit SpliceWriter(SpliceCalls calls = {}, bool zero_copy = true) : calls_(std::move(calls)) {
    if (!zero_copy) {
      zero_copy_ = false;
      return;
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      zero_copy_ = false;  // out of descriptors: copy instead
      return;
    }
    pipe_r_ = fds[0];
    pipe_w_ = fds[1];
    fcntl(pipe_w_, F_SETPIPE_SZ, static_cast<int>(PipeBytesWanted()));  // may be refused: keep the default
    const int size = fcntl(pipe_w_, F_GETPIPE_SZ);
    pipe_bytes_ = size > 0 ? size : 64 << 10;
  }
  ~SpliceWriter() {
    if (pipe_r_ >= 0) close(pipe_r_);
    if (pipe_w_ >= 0) close(pipe_w_);
  }
  SpliceWriter(const SpliceWriter&) = delete;
  SpliceWriter& operator=(const SpliceWriter&) = delete;

  // Writes every byte of `bufs` to c's socket, in order, or fails. Each wait for socket space
  // is bounded by `timeout` (no progress); Abort() on the connection ends it.
  template <typename Buffers>
  error_code Write(Connection& c, const Buffers& bufs, absl::Duration timeout) {
    std::vector<asio::const_buffer> left;
    for (auto it = asio::buffer_sequence_begin(bufs); it != asio::buffer_sequence_end(bufs); ++it)
      if (asio::const_buffer b(*it); b.size() > 0) left.push_back(b);
    size_t next = 0;                     // first buffer of `left` not yet (fully) in the pipe
    if (zero_copy_ && !non_blocking_) {  // once per writer: a writer serves one connection
      error_code ec;
      c.socket().native_non_blocking(true, ec);  // splice must return EAGAIN, not block
      if (ec) return ec;
      non_blocking_ = true;
    }
    while (zero_copy_ && (next < left.size() || in_pipe_ > 0)) {
      if (c.aborted()) return asio::error::operation_aborted;
      if (next < left.size() && in_pipe_ < pipe_bytes_) {
        if (error_code ec = Fill(left, next); ec) return ec;
        if (!zero_copy_) break;
      }
      if (in_pipe_ == 0) continue;
      const unsigned more = next < left.size() ? SPLICE_F_MORE : 0;  // never cork the last bytes
      const ssize_t n = calls_.splice(pipe_r_, c.socket().native_handle(), static_cast<size_t>(in_pipe_),
                                      SPLICE_F_NONBLOCK | more);
      if (n > 0) {
        in_pipe_ -= n;
        spliced_ += n;
        continue;
      }
      if (n == 0) return asio::error::broken_pipe;  // the pipe had bytes: cannot happen on Linux
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {  // socket buffer full: wait for room, with the deadline
        if (error_code ec =
                c.Run([&](auto h) { c.socket().async_wait(stream::socket::wait_write, h); }, timeout);
            ec)
          return ec;
        continue;
      }
      if (Unsupported(errno)) {
        zero_copy_ = false;
        break;
      }
      return error_code(errno, boost::system::system_category());
    }
    if (zero_copy_) return {};
    // Copy path: first what is still in the pipe, then the rest.
    if (error_code ec = DrainPipe(c, timeout); ec) return ec;
    std::vector<asio::const_buffer> rest(left.begin() + static_cast<std::ptrdiff_t>(next), left.end());
    int64_t n = 0;
    for (const auto& b : rest) n += static_cast<int64_t>(b.size());
    if (n == 0) return {};
    error_code ec = c.Write(rest, timeout);
    if (!ec) copied_ += n;
    return ec;
  }

  // False once the writer fell back to copying (or never had a pipe).
  bool zero_copy() const { return zero_copy_; }
  int64_t spliced_bytes() const { return spliced_; }
  int64_t copied_bytes() const { return copied_; }
  int64_t pipe_bytes() const { return pipe_bytes_; }

 private:
  static bool Unsupported(int err) {
    return err == EINVAL || err == ENOSYS || err == EOPNOTSUPP || err == EPERM;
  }

  // vmsplices the next buffers of `left` into the pipe (as much as fits), advancing them.
  error_code Fill(std::vector<asio::const_buffer>& left, size_t& next) {
    constexpr size_t kMaxIov = 64;
    iovec iov[kMaxIov];
    size_t count = 0;
    int64_t room = pipe_bytes_ - in_pipe_;
    for (size_t i = next; i < left.size() && count < kMaxIov && room > 0; ++i) {
      const size_t take = std::min<size_t>(left[i].size(), static_cast<size_t>(room));
      iov[count++] = {const_cast<void*>(left[i].data()), take};
      room -= static_cast<int64_t>(take);
    }
    for (;;) {
      const ssize_t n = calls_.vmsplice(pipe_w_, iov, count, SPLICE_F_NONBLOCK);
      if (n > 0) {
        in_pipe_ += n;
        for (size_t k = n; k > 0;) {  // advance past what went in
          const size_t take = std::min(k, left[next].size());
          left[next] += take;
          k -= take;
          if (left[next].size() == 0) ++next;
        }
        while (next < left.size() && left[next].size() == 0) ++next;
        return {};
      }
      if (n < 0 && errno == EINTR) continue;
      // The pipe counts pages, not bytes: unaligned buffers can fill it early. Splice first.
      if (n < 0 && errno == EAGAIN && in_pipe_ > 0) return {};
      if (n == 0 || (n < 0 && (errno == EAGAIN || Unsupported(errno)))) {
        zero_copy_ = false;  // an empty pipe that takes nothing: give up on splicing
        return {};
      }
      return error_code(errno, boost::system::system_category());
    }
  }

  // Moves what is left in the pipe to the socket by reading and writing it (copy path).
  error_code DrainPipe(Connection& c, absl::Duration timeout) {
    std::vector<uint8_t> buf;
    while (in_pipe_ > 0) {
      buf.resize(static_cast<size_t>(in_pipe_));
      const ssize_t n = read(pipe_r_, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return error_code(n < 0 ? errno : EIO, boost::system::system_category());
      if (error_code ec = c.Write(asio::buffer(buf.data(), static_cast<size_t>(n)), timeout); ec) return ec;
      in_pipe_ -= n;
      copied_ += n;
    }
    return {};
  }

  SpliceCalls calls_;
  int pipe_r_ = -1, pipe_w_ = -1;
  int64_t pipe_bytes_ = 0;
  int64_t in_pipe_ = 0;  // bytes vmspliced but not yet spliced into the socket
  bool zero_copy_ = true;
  bool non_blocking_ = false;  // the socket was put in non-blocking mode
  int64_t spliced_ = 0, copied_ = 0;
};

}  // namespace skyrl::weight_sync::tcp_internal
