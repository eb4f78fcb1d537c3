// A lease a worker grants its actor processes: a deadline on the machine's monotonic clock in a
// small shared file. The worker (LeaseWriter) moves the deadline on whenever it reaches the head;
// each actor host (LeaseReader) checks it a few times a second and stops itself once it has
// passed. So an actor stops serving when its worker has not reached the head in time, even
// when the worker cannot act: frozen (SIGSTOP), stalled, or cut off. docs/operations.md
// "Partitions" has the timing.
//
// The deadline is one 64-bit word, written and read atomically through a shared mapping:
// nanoseconds of CLOCK_BOOTTIME (the same clock in every process of the machine; unlike
// CLOCK_MONOTONIC it counts a suspend, so a lease does not outlive one), or kNoDeadline. A fresh lease has no
// deadline.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace skyrl {

// Nanoseconds on CLOCK_BOOTTIME.
int64_t MonotonicNowNs();

// The exit code of an actor host that stopped itself because its lease ran out.
inline constexpr int kLeaseRanOutExitCode = 75;

class LeaseWriter {
 public:
  static constexpr int64_t kNoDeadline = INT64_MAX;
  // Creates (or truncates) `path`, mode 0600, with no deadline. Removed by the destructor.
  static absl::StatusOr<std::unique_ptr<LeaseWriter>> Create(const std::string& path);
  ~LeaseWriter();
  LeaseWriter(const LeaseWriter&) = delete;
  LeaseWriter& operator=(const LeaseWriter&) = delete;

  // The deadline becomes `valid_for` from now (InfiniteDuration: none; zero or less: passed).
  void ExtendFor(absl::Duration valid_for);
  // As LeaseReader::Overdue.
  std::optional<absl::Duration> Overdue(int64_t now_ns) const;
  const std::string& path() const { return path_; }

 private:
  LeaseWriter(std::string path, int64_t* word) : path_(std::move(path)), word_(word) {}
  std::string path_;
  int64_t* word_;  // in a shared mapping of the file
};

class LeaseReader {
 public:
  // Maps `path` read-only. NotFound when it does not exist; InvalidArgument when it is not a
  // lease (wrong size).
  static absl::StatusOr<LeaseReader> Open(const std::string& path);
  LeaseReader(LeaseReader&& other) noexcept : word_(other.word_) { other.word_ = nullptr; }
  LeaseReader& operator=(LeaseReader&&) = delete;
  ~LeaseReader();

  // How long past its deadline the lease is at `now_ns` (MonotonicNowNs), or nullopt while it
  // holds or has none.
  std::optional<absl::Duration> Overdue(int64_t now_ns) const;

 private:
  explicit LeaseReader(const int64_t* word) : word_(word) {}
  const int64_t* word_;
};

}  // namespace skyrl
