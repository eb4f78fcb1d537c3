#include "weight_sync/rendezvous.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"

namespace skyrl::weight_sync {

absl::Status InMemoryRendezvous::Put(absl::string_view key, absl::string_view value) {
  absl::MutexLock lock(&mu_);
  kv_[std::string(key)] = std::string(value);
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryRendezvous::Get(absl::string_view key, absl::Duration timeout) {
  std::string k(key);
  absl::MutexLock lock(&mu_);
  auto present = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return kv_.count(k) > 0; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&present), timeout))
    return absl::DeadlineExceededError(
        absl::StrCat("rendezvous: key '", key, "' did not appear within ", absl::FormatDuration(timeout)));
  return kv_[k];
}

std::string FileRendezvous::Path(absl::string_view key) const {
  return absl::StrCat(dir_, "/", absl::StrReplaceAll(key, {{"/", "%"}}));
}

absl::Status FileRendezvous::Put(absl::string_view key, absl::string_view value) {
  std::string path = Path(key), tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(value.data(), value.size());
    if (!out) return absl::UnavailableError(absl::StrCat("rendezvous: cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return absl::UnavailableError(absl::StrCat("rendezvous: cannot rename ", tmp, " to ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::string> FileRendezvous::Get(absl::string_view key, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  std::string path = Path(key);
  while (true) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      return ss.str();
    }
    if (absl::Now() >= deadline)
      return absl::DeadlineExceededError(absl::StrCat("rendezvous: key '", key, "' did not appear in ", dir_,
                                                      " within ", absl::FormatDuration(timeout)));
    absl::SleepFor(absl::Milliseconds(5));
  }
}

}  // namespace skyrl::weight_sync
