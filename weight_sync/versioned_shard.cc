#include "weight_sync/transport.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace skyrl::weight_sync {

VersionedShard::VersionedShard(int64_t bytes, uint64_t version) : bytes_(bytes) {
  live_.version = version;
  live_.bytes = std::make_shared<const std::vector<uint8_t>>(bytes, 0);
}

VersionedShard::Snapshot VersionedShard::Current() const {
  absl::MutexLock lock(&mu_);
  return live_;
}

void VersionedShard::Load(uint64_t version, std::vector<uint8_t> bytes) {
  absl::MutexLock lock(&mu_);
  live_.version = version;
  live_.bytes = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
}

absl::StatusOr<absl::Span<uint8_t>> VersionedShard::BeginStaging(uint64_t version) {
  std::shared_ptr<const std::vector<uint8_t>> live;
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
    staging_ = std::make_shared<std::vector<uint8_t>>();
  }
  // Copy outside the lock: readers keep reading the live version meanwhile. Parameters a
  // filter leaves out keep their live bytes.
  std::vector<uint8_t> copy(*live);
  absl::MutexLock lock(&mu_);
  *staging_ = std::move(copy);
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
