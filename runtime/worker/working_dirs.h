// A worker's cache of working directories (runtime_env working_dir): each is a tar.gz stored
// once on the head by its content digest ("sha256:<hex>", the KV key kWorkingDirKeyPrefix +
// digest), fetched by the first actor that needs it on this node, checked against its digest,
// unpacked under the archive rules (runtime/archive) and kept for the next actors.
//
// Unpacking goes to a temporary folder renamed into place, so a folder under `root` named by a
// digest is always complete. Safe for concurrent use; one fetch per digest at a time.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/archive/archive.h"

namespace skyrl::worker {

class WorkingDirs {
 public:
  // Fetches the archive stored under a KV key (the head's KvService.Get).
  using Fetch = std::function<absl::StatusOr<std::string>(const std::string& key)>;

  WorkingDirs(std::string root, Fetch fetch, archive::Limits limits = {});

  // The unpacked folder of `digest`, fetched the first time. InvalidArgument for a malformed
  // digest, NotFound when the head has no such archive, DataLoss when the bytes do not match
  // the digest, the archive's own error when it is refused; nothing is left behind then.
  absl::StatusOr<std::string> Get(const std::string& digest);

 private:
  const std::string root_;
  const Fetch fetch_;
  const archive::Limits limits_;
  absl::Mutex mu_;  // held while fetching and unpacking: one at a time
};

}  // namespace skyrl::worker
