// VersionedShard: a receiver's shard of the weights and its version, the unit an engine
// serves from. Transports (transport.h) stage the next version into it; the engine reads
// whole versions only.
//
//   live v ──BeginStaging(v+1)──▶ staging ──MarkPrepared──▶ prepared ──Commit──▶ live v+1
//                                    └──────────Abort──────────┘ (live v stays)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "weight_sync/shard_bytes.h"

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
  // The same without a copy: `bytes` becomes the live buffer (the caller must not write it
  // afterwards). InvalidArgument when null or of another size.
  absl::Status Load(uint64_t version, std::shared_ptr<ShardBytes> bytes);

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

}  // namespace skyrl::weight_sync
