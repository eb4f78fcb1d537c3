// The TCP transport (Boost.Asio): one connection per (sender, receiver) pair with traffic, all
// of a rank's pairs in flight at once, buckets pipelined; on one host a Unix-domain socket and,
// granted by the receiver, direct writes into its staging buffer. The design, the wire
// protocol and the measurements are in docs/weight_sync.md ("TCP").
//
// Contract, beyond transport.h's:
// - Send is zero-copy by default: the caller leaves the shard unchanged until Send returns
//   (every receiver has then confirmed the whole version). After a failed Send the kernel may
//   still reference the shard's pages, and a receiver that stalled past sync_timeout may still
//   commit what it reads later: turn on checksums, abort on every receiver (defer_commit) or
//   set zero_copy_send = false where a caller reuses the shard after a failure.
// - Every wait has a deadline (io_timeout without progress; sync_timeout for the final
//   confirmation): a peer that dies or stalls fails the sync on both sides, naming the peer;
//   the receiver's live version stays.
// - Receivers listen from creation on (bind_host, any free port) and publish
//   "<key_prefix>/receiver/<rank>" in the rendezvous; senders look it up.
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
  // Deltas (TcpOptions::delta): payload sent as frames against the receiver's version, what
  // those frames took on the wire, and how many frames went compressed and raw.
  std::atomic<int64_t> delta_bytes{0};
  std::atomic<int64_t> delta_wire_bytes{0};
  std::atomic<int64_t> delta_frames{0};
  std::atomic<int64_t> delta_raw_frames{0};
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
  // Deltas. Sender: keep a copy of the last version sent (memory: one more shard) and send a
  // receiver that still holds it, piece by piece (frames of up to chunk_bytes, 64 MiB at
  // most), the XOR against it compressed with zstd, or the raw bytes where that does not pay
  // (less than a tenth saved); a receiver holding another version (a new one, one that
  // failed or aborted) gets every byte. Receiver: say which version it holds, apply the
  // frames to it, and check every compressed frame's checksum (of the result: a base that
  // is not the sender's fails it) whatever `checksums` says. Not with direct writes (already
  // a memcpy) or NCCL.
  bool delta = false;
  TcpStats* stats = nullptr;  // optional, not owned; must outlive the transport
};

// InvalidArgument for bad options (naming the field), Unavailable when it cannot listen.
absl::StatusOr<std::unique_ptr<Transport>> CreateTcpTransport(const TcpOptions& options);

}  // namespace skyrl::weight_sync
