// Rendezvous: how ranks of a sync find each other (receivers publish "host:port", senders look
// it up). Injected into transports. In-memory for threads-as-ranks tests, a directory of files
// for ranks in several processes on one machine; the head's KvService is the production one
// (not built yet, see docs/weight_sync.md).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace skyrl::weight_sync {

// Safe for concurrent use.
class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  // Sets key to value (overwriting).
  virtual absl::Status Put(absl::string_view key, absl::string_view value) = 0;
  // Waits up to `timeout` for the key; DeadlineExceeded naming the key when it never appears.
  virtual absl::StatusOr<std::string> Get(absl::string_view key, absl::Duration timeout) = 0;
};

class InMemoryRendezvous final : public Rendezvous {
 public:
  absl::Status Put(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key, absl::Duration timeout) override;

 private:
  absl::Mutex mu_;
  std::map<std::string, std::string> kv_ ABSL_GUARDED_BY(mu_);
};

// Keys are files in `dir` (slashes become '%'); writes are atomic (write, then rename); Get
// polls every 5 ms. For processes on one machine.
class FileRendezvous final : public Rendezvous {
 public:
  explicit FileRendezvous(std::string dir) : dir_(std::move(dir)) {}
  absl::Status Put(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key, absl::Duration timeout) override;

 private:
  std::string Path(absl::string_view key) const;
  std::string dir_;
};

}  // namespace skyrl::weight_sync
