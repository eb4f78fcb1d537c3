#include "runtime/worker/working_dirs.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "runtime/common/ids.h"

namespace skyrl::worker {

namespace fs = std::filesystem;

WorkingDirs::WorkingDirs(std::string root, Fetch fetch, archive::Limits limits)
    : root_(std::move(root)), fetch_(std::move(fetch)), limits_(limits) {}

absl::StatusOr<std::string> WorkingDirs::Get(const std::string& digest) {
  if (absl::Status s = ValidateWorkingDirDigest("working_dir", digest); !s.ok()) return s;
  // "sha256:..." is a fine folder name, but a colon upsets PYTHONPATH-like lists.
  const fs::path dir = fs::path(root_) / digest.substr(7);
  absl::MutexLock lock(&mu_);
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return dir.string();
  absl::StatusOr<std::string> bytes = fetch_(absl::StrCat(kWorkingDirKeyPrefix, digest));
  if (absl::IsNotFound(bytes.status()))
    return absl::NotFoundError(absl::StrCat("working_dir ", digest, ": the head has no such archive"));
  if (!bytes.ok())
    return absl::Status(bytes.status().code(),
                        absl::StrCat("working_dir ", digest, ": fetching it: ", bytes.status().message()));
  if (std::string got = archive::Sha256Digest(*bytes); got != digest)
    return absl::DataLossError(absl::StrCat("working_dir ", digest, ": the head's archive is ", got));
  fs::create_directories(root_, ec);
  const fs::path tmp = fs::path(root_) / absl::StrCat(".", digest.substr(7), ".", getpid());
  fs::remove_all(tmp, ec);
  if (absl::Status s = archive::UnpackTarGz(*bytes, tmp.string(), limits_); !s.ok()) {
    fs::remove_all(tmp, ec);
    return absl::Status(s.code(), absl::StrCat("working_dir ", digest, ": ", s.message()));
  }
  fs::rename(tmp, dir, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    return absl::InternalError(absl::StrCat("working_dir ", digest, ": cannot move it into ", dir.string()));
  }
  return dir.string();
}

}  // namespace skyrl::worker
