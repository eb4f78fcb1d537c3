#include "runtime/common/lease.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace skyrl {
namespace {

constexpr size_t kSize = sizeof(int64_t);

absl::Status Errno(absl::string_view what, const std::string& path) {
  const int e = errno;
  std::string message = absl::StrCat("lease ", path, ": ", what, ": ", std::strerror(e));
  return e == ENOENT ? absl::NotFoundError(message) : absl::InternalError(message);
}

// How long past the deadline in `word` the lease is at `now_ns`.
std::optional<absl::Duration> OverdueAt(const int64_t* word, int64_t now_ns) {
  const int64_t deadline = __atomic_load_n(word, __ATOMIC_ACQUIRE);
  if (deadline == LeaseWriter::kNoDeadline || now_ns <= deadline) return std::nullopt;
  return absl::Nanoseconds(now_ns - deadline);
}

}  // namespace

int64_t MonotonicNowNs() {
  timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

absl::StatusOr<std::unique_ptr<LeaseWriter>> LeaseWriter::Create(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("create", path);
  // Written before it is mapped: a reader never sees a deadline of zero.
  const int64_t none = kNoDeadline;
  if (pwrite(fd, &none, kSize, 0) != ssize_t(kSize)) {
    absl::Status s = Errno("write", path);
    close(fd);
    return s;
  }
  void* map = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  absl::Status failed = map == MAP_FAILED ? Errno("map", path) : absl::OkStatus();
  close(fd);  // the mapping keeps the file's pages
  if (!failed.ok()) return failed;
  return std::unique_ptr<LeaseWriter>(new LeaseWriter(path, static_cast<int64_t*>(map)));
}

LeaseWriter::~LeaseWriter() {
  munmap(word_, kSize);
  unlink(path_.c_str());
}

void LeaseWriter::ExtendFor(absl::Duration valid_for) {
  int64_t deadline = kNoDeadline;
  if (valid_for != absl::InfiniteDuration()) {
    const int64_t ns = valid_for <= absl::ZeroDuration() ? 0 : absl::ToInt64Nanoseconds(valid_for);
    deadline = MonotonicNowNs() + std::min<int64_t>(ns, kNoDeadline / 2);
  }
  __atomic_store_n(word_, deadline, __ATOMIC_RELEASE);
}

absl::StatusOr<LeaseReader> LeaseReader::Open(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("open", path);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    absl::Status s = Errno("stat", path);
    close(fd);
    return s;
  }
  if (st.st_size != off_t(kSize)) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("lease ", path, ": ", st.st_size, " bytes, not a lease (", kSize, " bytes)"));
  }
  void* map = mmap(nullptr, kSize, PROT_READ, MAP_SHARED, fd, 0);
  absl::Status failed = map == MAP_FAILED ? Errno("map", path) : absl::OkStatus();
  close(fd);
  if (!failed.ok()) return failed;
  return LeaseReader(static_cast<const int64_t*>(map));
}

LeaseReader::~LeaseReader() {
  if (word_ != nullptr) munmap(const_cast<int64_t*>(word_), kSize);
}

std::optional<absl::Duration> LeaseWriter::Overdue(int64_t now_ns) const { return OverdueAt(word_, now_ns); }

std::optional<absl::Duration> LeaseReader::Overdue(int64_t now_ns) const { return OverdueAt(word_, now_ns); }

}  // namespace skyrl
