// Direct writes: a sender on the receiver's host writes a sync's bytes straight into the
// receiver's staging buffer (tcp/tcp_transport.h).
//
// The receiver's staging buffer is a sealed memfd (ShardBytes). Over a Unix-domain connection
// the receiver passes that descriptor to the sender (SCM_RIGHTS, attached to its welcome) with
// a grant: the buffer's id and size, and where in it this sender's stream goes (its runs). The
// sender maps the buffer (once: mappings are kept across syncs, keyed by the buffer's id, and
// dropped when the receiver no longer holds the buffer), copies each bucket from its shard
// into the mapping with memcpy (no system call, no page pinning per page), and then sends the
// bucket's header (with the checksum) to say it is there. The socket still carries the
// protocol: headers, checksums and the final status.
//
// Why: on one host the kernel's copy paths (socket reads, process_vm_readv) ran at a third of
// a user-space memcpy's speed per core on the machines we measured (page pinning and per-page
// work; docs/performance.md); one memcpy per receiver, done by the sender's threads, is the
// least a broadcast can cost.
//
// What a receiver exposes is its staging buffer only, to the process at the other end of its
// Unix socket, and only for the sync that granted it: a receiver whose sync fails discards the
// buffer (VersionedShard::Abort(discard_buffer)), so that a sender still writing cannot touch
// a later version. A sender checks the seals (the buffer cannot shrink under its mapping) and
// that the grant lies inside the buffer.
#pragma once

#include <fcntl.h>
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

// Whether `c` is a Unix-domain connection (only those can pass descriptors).
inline bool IsLocal(Connection& c) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  return getsockname(c.socket().native_handle(), reinterpret_cast<sockaddr*>(&ss), &len) == 0 &&
         ss.ss_family == AF_UNIX;
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
    if (error_code ec = c.Run([&](auto h) { c.socket().async_wait(stream::socket::wait_write, h); }, timeout); ec)
      return ec;
  }
}

// Reads exactly `out.size()` bytes; a descriptor attached to them (if any) goes to `*fd`
// (close-on-exec; the caller owns it), else *fd = -1.
inline error_code ReadWithFd(Connection& c, std::string& out, int* fd, absl::Duration timeout) {
  *fd = -1;
  const int sock = c.socket().native_handle();
  for (;;) {
    if (error_code ec = c.Run([&](auto h) { c.socket().async_wait(stream::socket::wait_read, h); }, timeout); ec)
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
        if (*fd < 0) *fd = got;
        else close(got);  // more than we asked for
      }
    }
    if (static_cast<size_t>(n) == out.size()) return {};
    return c.Read(asio::buffer(out.data() + n, out.size() - n), timeout);
  }
}

// A sender's mappings of receivers' staging buffers, kept across syncs. Thread-safe.
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
    // Populated now: later syncs write through the same page tables without faults.
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED)
      return absl::InvalidArgumentError(absl::StrCat("mmap of the receiver's buffer: ", std::strerror(errno)));
    mine[id] = {p, bytes};
    return static_cast<uint8_t*>(p);
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
