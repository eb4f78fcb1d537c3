#include "weight_sync/versioned_shard.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace skyrl::weight_sync {

VersionedShard::VersionedShard(int64_t bytes, uint64_t version) : bytes_(bytes) {
  live_.version = version;
  // Created non-const (and handed out as const) so a retired buffer can be reused for staging.
  live_.bytes = ShardBytes::Make(bytes);
}

VersionedShard::Snapshot VersionedShard::Current() const {
  absl::MutexLock lock(&mu_);
  return live_;
}

absl::Status VersionedShard::Load(uint64_t version, std::vector<uint8_t> bytes) {
  if (static_cast<int64_t>(bytes.size()) != bytes_)
    return absl::InvalidArgumentError(
        absl::StrCat("shard: loading ", bytes.size(), " bytes into a shard of ", bytes_));
  return Load(version, ShardBytes::CopyOf(bytes));
}

absl::Status VersionedShard::Load(uint64_t version, std::shared_ptr<ShardBytes> bytes) {
  if (bytes == nullptr || static_cast<int64_t>(bytes->size()) != bytes_)
    return absl::InvalidArgumentError(
        absl::StrCat("shard: loading ", bytes ? bytes->size() : 0, " bytes into a shard of ", bytes_));
  absl::MutexLock lock(&mu_);
  live_.version = version;
  live_.bytes = std::move(bytes);
  return absl::OkStatus();
}

absl::StatusOr<absl::Span<uint8_t>> VersionedShard::BeginStaging(uint64_t version, bool keep_live_bytes,
                                                                 Staging mode) {
  std::shared_ptr<const ShardBytes> live, retired;
  {
    absl::MutexLock lock(&mu_);
    if (staging_)
      return absl::FailedPreconditionError(
          absl::StrCat("shard: version ", staging_version_, " is already being synced"));
    if (version <= live_.version)
      return absl::FailedPreconditionError(
          absl::StrCat("shard: version ", version, " is not newer than the live version ", live_.version));
    if (torn_ && keep_live_bytes)
      return absl::FailedPreconditionError(
          "shard: torn by a failed in-place sync; only a sync that overwrites the whole shard can repair it");
    if (mode == Staging::kInPlace && live_.bytes && live_.bytes.use_count() > 1)
      return absl::FailedPreconditionError(
          absl::StrCat("shard: an in-place sync needs the engine paused, but a reader still holds version ",
                       live_.version));
    staging_version_ = version;
    prepared_ = false;
    in_place_ = mode == Staging::kInPlace;
    if (torn_) {
      torn_ = false;
      // Never served; its contents are about to be overwritten. A discarded one is replaced.
      staging_ = torn_buffer_ ? std::move(torn_buffer_) : ShardBytes::Make(bytes_);
      return absl::Span<uint8_t>(staging_->data(), staging_->size());
    }
    if (in_place_) {
      // Only the shard holds the buffer (checked above) and it was created non-const.
      staging_ = std::const_pointer_cast<ShardBytes>(std::move(live_.bytes));
      return absl::Span<uint8_t>(staging_->data(), staging_->size());
    }
    live = live_.bytes;
    retired = std::move(retired_);
    staging_ = ShardBytes::Make(0);  // reserves the slot
  }
  // Outside the lock: readers keep reading the live version meanwhile.
  std::shared_ptr<ShardBytes> buf;
  if (retired && retired.use_count() == 1) {
    // No reader holds the retired version: reuse its pages (const only towards readers).
    buf = std::const_pointer_cast<ShardBytes>(std::move(retired));
    if (keep_live_bytes) std::memcpy(buf->data(), live->data(), live->size());
  } else if (keep_live_bytes) {
    buf = ShardBytes::CopyOf(live->span());
  } else {
    buf = ShardBytes::Make(bytes_);
  }
  absl::MutexLock lock(&mu_);
  staging_ = std::move(buf);
  return absl::Span<uint8_t>(staging_->data(), staging_->size());
}

std::shared_ptr<ShardBytes> VersionedShard::StagingBuffer() const {
  absl::MutexLock lock(&mu_);
  return staging_;
}

void VersionedShard::MarkPrepared() {
  absl::MutexLock lock(&mu_);
  if (staging_) prepared_ = true;
}

absl::Status VersionedShard::Commit() {
  absl::MutexLock lock(&mu_);
  if (!staging_ || !prepared_) return absl::FailedPreconditionError("shard: no prepared version to commit");
  live_.version = staging_version_;
  if (!in_place_) retired_ = std::move(live_.bytes);
  live_.bytes = std::move(staging_);
  in_place_ = false;
  staging_.reset();
  staging_version_ = 0;
  prepared_ = false;
  return absl::OkStatus();
}

void VersionedShard::Abort(bool discard_buffer) {
  absl::MutexLock lock(&mu_);
  if (in_place_ && staging_) {
    // The live bytes were partly overwritten: serve nothing until a full sync repairs them.
    torn_ = true;
    if (!discard_buffer) torn_buffer_ = std::move(staging_);
    live_ = Snapshot{};
    in_place_ = false;
  }
  staging_.reset();
  staging_version_ = 0;
  prepared_ = false;
}

uint64_t VersionedShard::PendingVersion() const {
  absl::MutexLock lock(&mu_);
  return staging_version_;
}

std::string Aftermath(const VersionedShard& shard) {
  VersionedShard::Snapshot s = shard.Current();
  if (s.bytes == nullptr)
    return "(the in-place sync tore the shard: nothing is served until a sync of the whole shard succeeds)";
  return absl::StrCat("(version ", s.version, " stays live)");
}

}  // namespace skyrl::weight_sync
