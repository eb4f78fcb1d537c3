// Direct writes: a sender on the receiver's host writes a sync's bytes straight into the
// receiver's staging buffer (tcp/tcp_transport.h).
//
// The receiver's staging buffer is a sealed memfd (ShardBytes). Over a Unix-domain connection
// the receiver passes that descriptor to the sender (SCM_RIGHTS, attached to its welcome) with
// a grant: the buffer's id and size, the id of the buffer it serves from, and where in the
// buffer this sender's stream goes (its runs). The sender maps the buffer (once: mappings are
// kept across syncs, keyed by receiver and buffer id; see SharedMappings), copies each bucket
// from its shard into the mapping with memcpy (no system call, no page pinning per page), and
// then sends the bucket's header (with the checksum) to say it is there. The socket still
// carries the protocol: headers, checksums and the final status.
//
// Why: on one host the kernel's copy paths (socket reads, process_vm_readv) ran at a third of
// a user-space memcpy's speed per core on the machines we measured (page pinning and per-page
// work; docs/performance.md); one memcpy per receiver, done by the sender's threads, is the
// least a broadcast can cost.
//
// Safety. A receiver grants only a peer of its own user (SO_PEERCRED) on its Unix socket. A
// receiver whose sync fails after granting discards the buffer
// (VersionedShard::Abort(discard_buffer)), so that a sender still copying into it cannot touch
// a later version. A sender checks the seals (the buffer cannot shrink under its mapping, so
// no SIGBUS) and that the grant's runs lie inside the buffer and add up to its stream.
// Trust: a granted sender keeps a writable mapping of the receiver's buffers between syncs
// (including the one being served), as it keeps the right to send any bytes: senders are the
// trainer's ranks, trusted with the weights either way. A correct sender writes only inside a
// sync that granted the buffer, and only before that bucket's header.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "weight_sync/tcp/connection.h"

namespace skyrl::weight_sync::tcp_internal {

// Whether `c` is a Unix-domain connection to a process of our own user: the only peers that
// are granted a buffer. (Abstract socket names carry no permissions: any user in the network
// namespace can connect; the kernel's SO_PEERCRED says who did.)
inline bool IsLocalSameUser(Connection& c) {
  const int fd = c.socket().native_handle();
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0 || ss.ss_family != AF_UNIX) return false;
  ucred cred{};
  socklen_t clen = sizeof cred;
  return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0 && clen == sizeof cred &&
         cred.uid == geteuid();
}

// Whether the peer sent something or hung up (without reading it): a receiver that failed
// says so at once, and a sender copying a large bucket should stop.
inline bool PeerSpokeOrLeft(Connection& c) {
  pollfd p{c.socket().native_handle(), POLLIN | POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR));
}

// Writes `frame` with descriptor `fd` attached to its first byte, within `timeout`.
inline error_code WriteWithFd(Connection& c, const std::string& frame, int fd, absl::Duration timeout) {
  const int sock = c.socket().native_handle();
  for (;;) {
    iovec iov{const_cast<char*>(frame.data()), frame.size()};
    alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl;
    msg.msg_controllen = sizeof ctrl;
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    const ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n >= 0) {
      // The descriptor went with the first byte; the rest is an ordinary write.
      if (static_cast<size_t>(n) == frame.size()) return {};
      return c.Write(asio::buffer(frame.data() + n, frame.size() - n), timeout);
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return error_code(errno, boost::system::system_category());
    if (error_code ec = c.Run([&](auto h) { c.socket().async_wait(stream::socket::wait_write, h); }, timeout);
        ec)
      return ec;
  }
}

// Reads exactly `out.size()` bytes; a descriptor attached to them (if any) goes to `*fd`
// (close-on-exec; the caller owns it), else *fd = -1.
inline error_code ReadWithFd(Connection& c, std::string& out, int* fd, absl::Duration timeout) {
  *fd = -1;
  const int sock = c.socket().native_handle();
  for (;;) {
    if (error_code ec = c.Run([&](auto h) { c.socket().async_wait(stream::socket::wait_read, h); }, timeout);
        ec)
      return ec;
    iovec iov{out.data(), out.size()};
    alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int) * 4)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl;
    msg.msg_controllen = sizeof ctrl;
    const ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n < 0) return error_code(errno, boost::system::system_category());
    if (n == 0) return asio::error::eof;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
      if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int got;
        std::memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
        if (*fd < 0)
          *fd = got;
        else
          close(got);  // more than we asked for
      }
    }
    if (static_cast<size_t>(n) == out.size()) return {};
    return c.Read(asio::buffer(out.data() + n, out.size() - n), timeout);
  }
}

// A sender's mappings of receivers' staging buffers, kept across syncs: per receiver at most
// two (the buffer of its last grant and the one it serves from, which a later sync is staged
// in), until the next sync with it, a failed one, or the transport's end. Thread-safe; a
// pointer from Map stays valid until the next Map or Drop for the same rank (one Send at a
// time uses it).
class SharedMappings {
 public:
  SharedMappings() = default;
  SharedMappings(const SharedMappings&) = delete;
  SharedMappings& operator=(const SharedMappings&) = delete;
  ~SharedMappings() {
    for (auto& [rank, mine] : maps_)
      for (auto& [id, m] : mine) munmap(m.addr, m.len);
  }

  // The mapping of receiver `rank`'s buffer `id` (`bytes` long), from `fd` when not mapped yet
  // (the caller closes fd). Drops that receiver's other mappings except `keep` (the buffer it
  // still serves from, which a later sync will be staged in). Mappings are keyed by (rank,
  // id): one receiver's ids never touch another's. InvalidArgument when the descriptor is not
  // a sealed buffer of at least `bytes`.
  absl::StatusOr<uint8_t*> Map(int rank, uint64_t id, uint64_t keep, uint64_t bytes, int fd) {
    absl::MutexLock lock(&mu_);
    auto& mine = maps_[rank];
    for (auto it = mine.begin(); it != mine.end();) {
      if (it->first != id && it->first != keep) {
        munmap(it->second.addr, it->second.len);
        it = mine.erase(it);
      } else {
        ++it;
      }
    }
    if (auto it = mine.find(id); it != mine.end()) {
      if (it->second.len == bytes) return static_cast<uint8_t*>(it->second.addr);
      munmap(it->second.addr, it->second.len);  // same id, another size: not the same buffer
      mine.erase(it);
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < bytes)
      return absl::InvalidArgumentError(absl::StrCat("the receiver's buffer is not ", bytes, " bytes"));
    const int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK))
      return absl::InvalidArgumentError("the receiver's buffer is not sealed against shrinking");
    // Not populated: we touch only the pages we write (our stream's bytes), whatever the
    // buffer's size. Kept across syncs, so later ones write without page faults.
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
      return absl::InvalidArgumentError(
          absl::StrCat("mmap of the receiver's buffer: ", std::strerror(errno)));
    mine[id] = {p, bytes};
    return static_cast<uint8_t*>(p);
  }
  // Forgets receiver `rank`'s buffers (it streams now, or a sync with it failed).
  void Drop(int rank) {
    absl::MutexLock lock(&mu_);
    auto it = maps_.find(rank);
    if (it == maps_.end()) return;
    for (auto& [id, m] : it->second) munmap(m.addr, m.len);
    maps_.erase(it);
  }
  size_t size() const {
    absl::MutexLock lock(&mu_);
    size_t n = 0;
    for (const auto& [rank, m] : maps_) n += m.size();
    return n;
  }

 private:
  struct Mapping {
    void* addr;
    uint64_t len;
  };
  mutable absl::Mutex mu_;
  std::map<int, std::map<uint64_t, Mapping>> maps_ ABSL_GUARDED_BY(mu_);  // rank -> id -> mapping
};

}  // namespace skyrl::weight_sync::tcp_internal
