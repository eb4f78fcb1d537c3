// Direct reads from a sender's memory on the same host (cross-memory attach: process_vm_readv).
//
// Over a Unix-domain connection the receiver knows, from the kernel (SO_PEERCRED), which
// process is at the other end. When the sender offers it, the receiver copies the payload
// straight from the sender's shard into its staging buffer: one copy per receiver and no
// socket buffers, page pinning per packet or sender CPU in between (docs/weight_sync.md,
// "Same host: direct reads"). The sender still sends headers, a table of its memory ranges per
// bucket and the checksums over the socket, and the receiver's final status comes back on it.
//
// The kernel allows the read when the receiver may ptrace the sender: same user, and no Yama
// restriction (kernel.yama.ptrace_scope 0) or a seccomp profile that forbids it. Before any
// payload, the receiver proves that it can read the sender by reading a random 64-bit probe
// the sender published in its hello; if that fails for any reason the connection streams the
// bytes through the socket as before.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace skyrl::weight_sync::tcp_internal {

// A contiguous range: local (where to put bytes) or remote (where to read them in the peer).
struct Range {
  uint64_t addr = 0;
  uint64_t len = 0;
};

// The pid of the process at the other end of Unix-domain socket `fd`, as this process's pid
// namespace sees it; 0 when unknown (not a Unix socket, or a peer in a pid namespace we
// cannot see).
inline pid_t PeerPid(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof cred) return 0;
  return cred.pid > 0 ? cred.pid : 0;
}

// Copies the bytes of `remote` (ranges in process `pid`) into `local` (ranges here), in
// order; the two lists must cover the same number of bytes. Handles the kernel's partial reads
// and its IOV_MAX limit per call. Errors name the pid and the failing offset: Unavailable when
// the process is gone, PermissionDenied when the kernel refuses, DataLoss for an unreadable
// range (the sender gave a bad table, or freed its shard).
inline absl::Status ReadPeer(pid_t pid, const std::vector<Range>& local, const std::vector<Range>& remote) {
  constexpr size_t kMaxIov = 1024;  // IOV_MAX on Linux
  size_t li = 0, ri = 0;            // current range on each side
  uint64_t lat = 0, rat = 0;        // bytes of it already done
  uint64_t done = 0;
  std::vector<iovec> lv, rv;
  while (li < local.size() && ri < remote.size()) {
    lv.clear();
    rv.clear();
    for (size_t i = li; i < local.size() && lv.size() < kMaxIov; ++i) {
      const uint64_t skip = i == li ? lat : 0;
      lv.push_back({reinterpret_cast<void*>(local[i].addr + skip), local[i].len - skip});
    }
    for (size_t i = ri; i < remote.size() && rv.size() < kMaxIov; ++i) {
      const uint64_t skip = i == ri ? rat : 0;
      rv.push_back({reinterpret_cast<void*>(remote[i].addr + skip), remote[i].len - skip});
    }
    const ssize_t n = process_vm_readv(pid, lv.data(), lv.size(), rv.data(), rv.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EFAULT;
      const std::string what = absl::StrCat("reading sender process ", pid, "'s memory at byte ", done, ": ",
                                            std::strerror(err));
      if (err == ESRCH) return absl::UnavailableError(absl::StrCat(what, " (the sender exited)"));
      if (err == EPERM) return absl::PermissionDeniedError(what);
      return absl::DataLossError(what);
    }
    done += static_cast<uint64_t>(n);
    // Advance both sides by n.
    for (uint64_t left = n; left > 0;) {
      const uint64_t take = std::min(left, local[li].len - lat);
      lat += take;
      left -= take;
      if (lat == local[li].len) ++li, lat = 0;
    }
    for (uint64_t left = n; left > 0;) {
      const uint64_t take = std::min(left, remote[ri].len - rat);
      rat += take;
      left -= take;
      if (rat == remote[ri].len) ++ri, rat = 0;
    }
  }
  if (li != local.size() || ri != remote.size())
    return absl::InternalError(absl::StrCat("direct read: the local and remote ranges differ in length (", done,
                                            " bytes read)"));
  return absl::OkStatus();
}

}  // namespace skyrl::weight_sync::tcp_internal
