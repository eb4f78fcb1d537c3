// The transport interface: executes one rank's part of a plan (its RankSchedule) for one weight
// version. Implementations: TCP (weight_sync/tcp/), NCCL (weight_sync/nccl/). Transports know
// schedules and byte buffers, never models.
//
// Versions and atomicity (receiver side):
//
//   live v ──Receive(v+1)──▶ staging (copy of v, then overwritten) ──all senders' bytes in,
//   checksums ok──▶ prepared ──Commit()──▶ live v+1
//                   └──any failure──▶ Abort(): live v untouched
//
// An engine reads through VersionedShard::Current(), a snapshot that never changes under it, so
// it sees v or v+1 and never a mix. Several ranks of one engine should commit together: with
// TransferOptions::defer_commit the caller commits every rank after every rank's Receive
// succeeded (and aborts them all otherwise).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "weight_sync/plan/schedule.h"
#include "weight_sync/versioned_shard.h"

namespace skyrl::weight_sync {

struct TransferOptions {
  // Bytes between checksums and acknowledgement points on one connection (SkyRL's default).
  int64_t bucket_bytes = int64_t{1} << 30;
  // Bytes per socket read or write; each has its own no-progress timeout.
  int64_t chunk_bytes = int64_t{8} << 20;
  bool checksums = false;  // on in tests
  // Longest wait without progress: connect, accept, a chunk, an acknowledgement, a rendezvous.
  absl::Duration io_timeout = absl::Seconds(30);
  // Longest a sender waits, after its last byte, for a receiver's final confirmation (which
  // comes once that receiver has every sender's bytes).
  absl::Duration sync_timeout = absl::Minutes(10);
  // Receiver: leave the version prepared; the caller calls Commit() or Abort().
  bool defer_commit = false;
  Staging staging = Staging::kCopy;
};

// One rank's endpoint. Send and Receive may run at the same time on a rank that is both (a
// colocated trainer/engine GPU); each is otherwise called by one thread at a time.
class Transport {
 public:
  virtual ~Transport() = default;
  // Sends `shard`'s runs to every peer of `schedule` as weight `version`. OK once every peer
  // has confirmed the whole version (every sender's bytes, verified, prepared or committed);
  // otherwise the first failure, naming the receiver.
  virtual absl::Status Send(uint64_t version, const RankSchedule& schedule,
                            absl::Span<const uint8_t> shard) = 0;
  // Receives `version` from every peer of `schedule` into `shard`'s staging and commits it
  // (unless defer_commit). On any failure the staging is dropped and the live version stays;
  // the status names the sender and what went wrong.
  virtual absl::Status Receive(uint64_t version, const RankSchedule& schedule, VersionedShard& shard) = 0;
};

}  // namespace skyrl::weight_sync
