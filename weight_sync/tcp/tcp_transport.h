// The TCP transport over Boost.Asio: one connection per (sender, receiver) pair with traffic,
// all pairs of a rank in flight at once; each stream is cut into buckets (header with index,
// length and optional checksum) and each bucket into chunks written straight from the shard's
// runs (scatter/gather, no staging copy on the sender; the receiver reads into its staging
// buffer). Buckets are pipelined: the receiver acknowledges a connection once, after its last
// bucket, with a status.
//
// Sending is zero-copy by default (TcpOptions::zero_copy_send): the kernel references the
// shard's pages instead of copying them into socket buffers, so the caller must leave the
// shard unchanged until Send returns, which it does only once every receiver confirmed the
// whole version. A Send that fails may return while the kernel still holds references to the
// shard's pages (they keep the memory valid, even if the caller frees it). A receiver whose
// connection broke fails its sync anyway; but one that stalled past the sender's sync_timeout
// after all its bytes were queued can still complete later, reading the pages as they are
// then. So if the caller changes (or frees and reuses) the shard after a failed Send while
// such a receiver may still commit, it could commit a mix. Where that matters: turn on
// TransferOptions::checksums (a bucket's checksum is taken from the shard before it is sent,
// so a changed byte fails it with DataLoss), abort the version on every receiver when any
// rank failed (defer_commit), or set zero_copy_send = false.
//
// Every wait has a deadline (TransferOptions::io_timeout without progress): rendezvous,
// connect, accept, each chunk, the acknowledgement. A peer that dies or stalls fails the sync
// on both sides with a status naming the peer; the receiver's live version stays.
//
// Receivers listen on `bind_host` port 0 (any free port) from creation on and publish
// "<key_prefix>/receiver/<rank>" = "host:port" in the rendezvous; senders look it up.
//
// Same host: a receiver also listens on an abstract Unix-domain socket and publishes it with
// its host's identity ("host:port local=<name> host=<boot id>/<netns inode>"); a sender on the
// same host (same boot, same network namespace) connects there instead, and falls back to TCP
// when that fails. Same protocol, same zero-copy sending; on one machine it moves about 1.5x
// the bytes per CPU second that loopback TCP does (docs/performance.md). TcpOptions::
// same_host_unix_socket = false keeps every connection on TCP.
//
// Direct writes: over such a Unix connection the receiver may grant the sender its staging
// buffer (shared memory, passed as a descriptor) and the sender then copies each bucket into it
// before sending the bucket's header (TcpOptions::same_host_direct_write, on by default). The
// socket still carries headers, checksums and statuses; each bucket says whether it was
// written or streams behind its header, so a sender that cannot map the buffer streams.
// The wire format is little-endian and versioned (magic "SKWS", protocol 2).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "weight_sync/rendezvous.h"
#include "weight_sync/transport.h"

namespace skyrl::weight_sync {

// Counters a transport adds to over all its syncs; safe to read while syncs run.
struct TcpStats {
  std::atomic<int64_t> spliced_bytes{0};  // payload sent zero-copy (vmsplice + splice)
  std::atomic<int64_t> copied_bytes{0};   // payload sent through ordinary writes
  // Payload the sender wrote straight into receivers' buffers on this host (direct writes).
  std::atomic<int64_t> direct_write_bytes{0};
  // Connections a sender made, by path: Unix-domain (same host) and TCP.
  std::atomic<int64_t> local_connections{0};
  std::atomic<int64_t> tcp_connections{0};
};

struct TcpOptions {
  Rendezvous* rendezvous = nullptr;  // not owned; must outlive the transport
  std::string key_prefix = "weight_sync";
  int receiver_rank = -1;  // >= 0: this endpoint receives as that rank (listens, publishes)
  std::string bind_host = "127.0.0.1";
  // The host senders should dial, published in the rendezvous; empty: bind_host (which must
  // then not be a wildcard such as 0.0.0.0).
  std::string advertise_host;
  TransferOptions transfer;
  // Sender: map the shard's pages into each socket instead of copying them (vmsplice + splice,
  // see tcp/splice_writer.h), falling back to ordinary writes where the kernel refuses. The
  // shard's bytes must not change until Send returns (Send's contract already; see there).
  bool zero_copy_send = true;
  // Receiver: also listen on an abstract Unix socket for senders on this host. Sender: use it
  // when the receiver offers one and is on this host. Both sides must allow it.
  bool same_host_unix_socket = true;
  // Over those Unix sockets, the sender writes the payload straight into the receiver's
  // staging buffer, which the receiver shares with it (a memfd passed over the socket;
  // tcp/direct_write.h): one user-space memcpy per receiver byte, no socket buffers. Both
  // sides must allow it; a connection streams through the socket otherwise (and where the
  // receiver's buffer is not shared memory).
  bool same_host_direct_write = true;
  // Sender: connections over Unix sockets that carry identical bytes (several receivers of one
  // stream) stay within this many bytes of each other, so that each source page is copied by
  // every receiver while it is in the cache (tcp/lockstep.h; best effort: a laggard is left
  // behind after 50 ms). 0: off; else 64 KiB to 1 GiB.
  int64_t lockstep_window_bytes = int64_t{2} << 20;
  TcpStats* stats = nullptr;  // optional, not owned; must outlive the transport
};

// InvalidArgument for bad options (naming the field), Unavailable when it cannot listen.
absl::StatusOr<std::unique_ptr<Transport>> CreateTcpTransport(const TcpOptions& options);

}  // namespace skyrl::weight_sync
