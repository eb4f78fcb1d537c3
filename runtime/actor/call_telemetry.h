// What an actor host keeps about the calls it answers (actor.proto, Telemetry): per method,
// counts by status code and a histogram of seconds from arrival to answer; and the most recent
// calls' timestamps in a bounded ring, for timelines.
//
//   CallTelemetry t(/*ring=*/16384);
//   t.Record("train", arrived, started, ended, code);  // when a call is answered
//   v1::ActorTelemetryReply r = t.Snapshot(/*with_records=*/true);
//
// Method names past kMaxMethods distinct ones share one slot, "(other)", so a caller naming
// ever new methods cannot grow the host. Disabled (CallTelemetry(0, false)), every call is a
// no-op and a snapshot says so. Thread-safe; one short critical section per call, taken by
// the thread that answers it (so on a host with one executor the lock never changes cores).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "runtime/common/spin_lock.h"
#include "absl/time/time.h"
#include "skyrl/actor.pb.h"

namespace skyrl {

class CallTelemetry {
 public:
  static constexpr size_t kMaxMethods = 256;
  static constexpr size_t kDefaultRing = 16384;
  static constexpr char kOtherMethod[] = "(other)";
  // Upper bounds of the latency buckets, in seconds.
  static const std::vector<double>& LatencyBounds();

  // `ring`: how many recent calls to keep (0: none, counts only). `enabled` false: keep nothing.
  explicit CallTelemetry(size_t ring = kDefaultRing, bool enabled = true);

  // Whether telemetry is on for hosts started with this environment: SKYRL_CALL_TELEMETRY
  // unset, or anything but "0", "off", "false".
  static bool EnabledByEnvironment();

  bool enabled() const { return enabled_; }
  // The slot counting calls to `method` (-1 when disabled).
  int Slot(absl::string_view method);
  // One answered call. `started`: absl::InfinitePast() when it never ran. `code`: a
  // google.rpc.Code.
  void Record(absl::string_view method, absl::Time arrived, absl::Time started, absl::Time ended, int code);
  void Record(int slot, absl::Time arrived, absl::Time started, absl::Time ended, int code);

  // Everything kept so far; the records oldest first, only `with_records`. Queue depth and
  // running calls are the caller's to fill in.
  v1::ActorTelemetryReply Snapshot(bool with_records) const;

 private:
  static constexpr int kCodes = 17;  // google.rpc.Code 0..16; others count as UNKNOWN (2)
  struct Method {
    std::string name;
    uint64_t by_code[kCodes] = {};
    std::vector<uint64_t> buckets;
    int64_t sum_us = 0;
  };
  struct Rec {
    int32_t slot;
    int32_t code;
    int64_t arrived_us, start_us, end_us;
    int32_t bucket;  // of the latency histogram
  };

  int SlotLocked(absl::string_view method) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Rec MakeRec(absl::Time arrived, absl::Time started, absl::Time ended, int code) const;
  void RecordLocked(const Rec& rec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const bool enabled_;
  const size_t ring_size_;
  std::vector<int64_t> bounds_us_;  // LatencyBounds in microseconds
  // On cache lines of its own (the class is 64-byte aligned, so its size is whole lines): the
  // recording thread's writes must not evict what the host's gRPC threads use nearby.
  alignas(64) mutable SpinLock mu_;
  absl::flat_hash_map<std::string, int> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<Method> methods_ ABSL_GUARDED_BY(mu_);
  int last_slot_ ABSL_GUARDED_BY(mu_) = -1;  // the slot the last lookup found
  std::vector<Rec> ring_ ABSL_GUARDED_BY(mu_);
  uint64_t recorded_ ABSL_GUARDED_BY(mu_) = 0;  // records ever written to the ring
};

}  // namespace skyrl
