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
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "weight_sync/shard_bytes.h"
#include "weight_sync/plan/schedule.h"

namespace skyrl::weight_sync {

// Where a receiver assembles the next version.
enum class Staging {
  // Beside the live version (memory: two shards); any failure leaves the live version serving.
  kCopy,
  // Into the live buffer itself (memory: one shard, no buckets held), for shards that do not fit
  // twice. The engine must be paused: starting fails while a reader holds a snapshot, and until
  // the commit Current() serves nothing (bytes == nullptr). A failure leaves the shard torn
  // (version 0, nothing served) until a sync that overwrites the whole shard succeeds.
  kInPlace,
};

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

// A receiver's shard and its weight version. Safe for concurrent use; one sync at a time.
class VersionedShard {
 public:
  explicit VersionedShard(int64_t bytes, uint64_t version = 0);

  struct Snapshot {
    uint64_t version = 0;
    std::shared_ptr<const ShardBytes> bytes;
  };
  // What an engine serves: whole, and unchanged while held. bytes == nullptr while an in-place
  // sync applies and after one failed (see Staging::kInPlace).
  Snapshot Current() const;

  // Replaces the live bytes (initial load). InvalidArgument when the size differs from the
  // shard's. REQUIRES no sync in progress.
  absl::Status Load(uint64_t version, std::vector<uint8_t> bytes);

  // Starts a sync to `version` and returns the staging buffer. With `keep_live_bytes` it starts
  // as a copy of the live bytes (for syncs that overwrite only part of the shard, e.g. LoRA);
  // without, its contents are unspecified (every byte will be overwritten). The buffer of the
  // version before the live one is reused when no reader holds it any more, so steady-state
  // syncs allocate nothing. FailedPrecondition when a sync is already staged or `version` is
  // not newer than the live one.
  // With Staging::kInPlace the live buffer itself is returned (FailedPrecondition while a
  // reader holds it, or when the shard is torn and `keep_live_bytes` asks for its contents).
  absl::StatusOr<absl::Span<uint8_t>> BeginStaging(uint64_t version, bool keep_live_bytes = true,
                                                   Staging mode = Staging::kCopy);
  // The buffer being staged (nullptr when none): for a transport that hands it to a peer on
  // this host (ShardBytes::fd()).
  std::shared_ptr<ShardBytes> StagingBuffer() const;
  // Marks staged bytes complete (transport's job).
  void MarkPrepared();
  // Swaps the prepared version in. FailedPrecondition when nothing is prepared.
  absl::Status Commit();
  // Drops a staged or prepared version; the live one stays (kCopy) or the shard is torn
  // (kInPlace). `discard_buffer`: never reuse the staging buffer (a peer that was handed it
  // may still write into it); a torn shard then gets a fresh buffer at its next sync.
  void Abort(bool discard_buffer = false);
  // The version being staged or prepared, or 0.
  uint64_t PendingVersion() const;
  int64_t Bytes() const { return bytes_; }

 private:
  const int64_t bytes_;
  mutable absl::Mutex mu_;
  Snapshot live_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<ShardBytes> staging_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const ShardBytes> retired_ ABSL_GUARDED_BY(mu_);  // the previous live buffer
  uint64_t staging_version_ ABSL_GUARDED_BY(mu_) = 0;
  bool prepared_ ABSL_GUARDED_BY(mu_) = false;
  bool in_place_ ABSL_GUARDED_BY(mu_) = false;
  // A failed in-place sync tore the shard; its buffer is reused (never served) by the next
  // sync unless it was discarded (then null, and the next sync gets a fresh one).
  bool torn_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<ShardBytes> torn_buffer_ ABSL_GUARDED_BY(mu_);
};

// For failure messages: "(version 3 stays live)" or what a failed in-place sync left.
std::string Aftermath(const VersionedShard& shard);

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
