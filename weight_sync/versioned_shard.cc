#include "weight_sync/transport.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace skyrl::weight_sync {

VersionedShard::VersionedShard(int64_t bytes, uint64_t version) : bytes_(bytes) {
  live_.version = version;
  // Created non-const (and handed out as const) so a retired buffer can be reused for staging.
  live_.bytes = std::make_shared<std::vector<uint8_t>>(bytes, 0);
}

VersionedShard::Snapshot VersionedShard::Current() const {
  absl::MutexLock lock(&mu_);
  return live_;
}

absl::Status VersionedShard::Load(uint64_t version, std::vector<uint8_t> bytes) {
  if (static_cast<int64_t>(bytes.size()) != bytes_)
    return absl::InvalidArgumentError(absl::StrCat("shard: loading ", bytes.size(), " bytes into a shard of ", bytes_));
  absl::MutexLock lock(&mu_);
  live_.version = version;
  live_.bytes = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  return absl::OkStatus();
}

absl::StatusOr<absl::Span<uint8_t>> VersionedShard::BeginStaging(uint64_t version, bool keep_live_bytes) {
  std::shared_ptr<const std::vector<uint8_t>> live, retired;
  {
    absl::MutexLock lock(&mu_);
    if (staging_)
      return absl::FailedPreconditionError(absl::StrCat("shard: version ", staging_version_,
                                                        " is already being synced"));
    if (version <= live_.version)
      return absl::FailedPreconditionError(absl::StrCat("shard: version ", version,
                                                        " is not newer than the live version ",
                                                        live_.version));
    staging_version_ = version;
    prepared_ = false;
    live = live_.bytes;
    retired = std::move(retired_);
    staging_ = std::make_shared<std::vector<uint8_t>>();  // reserves the slot
  }
  // Outside the lock: readers keep reading the live version meanwhile.
  std::shared_ptr<std::vector<uint8_t>> buf;
  if (retired && retired.use_count() == 1) {
    // No reader holds the retired version: reuse its pages (const only towards readers).
    buf = std::const_pointer_cast<std::vector<uint8_t>>(std::move(retired));
    if (keep_live_bytes) std::memcpy(buf->data(), live->data(), live->size());
  } else if (keep_live_bytes) {
    buf = std::make_shared<std::vector<uint8_t>>(*live);
  } else {
    buf = std::make_shared<std::vector<uint8_t>>(bytes_);
  }
  absl::MutexLock lock(&mu_);
  staging_ = std::move(buf);
  return absl::Span<uint8_t>(staging_->data(), staging_->size());
}

void VersionedShard::MarkPrepared() {
  absl::MutexLock lock(&mu_);
  if (staging_) prepared_ = true;
}

absl::Status VersionedShard::Commit() {
  absl::MutexLock lock(&mu_);
  if (!staging_ || !prepared_)
    return absl::FailedPreconditionError("shard: no prepared version to commit");
  live_.version = staging_version_;
  retired_ = std::move(live_.bytes);
  live_.bytes = std::move(staging_);
  staging_.reset();
  staging_version_ = 0;
  prepared_ = false;
  return absl::OkStatus();
}

void VersionedShard::Abort() {
  absl::MutexLock lock(&mu_);
  staging_.reset();
  staging_version_ = 0;
  prepared_ = false;
}

uint64_t VersionedShard::PendingVersion() const {
  absl::MutexLock lock(&mu_);
  return staging_version_;
}

}  // namespace skyrl::weight_sync
