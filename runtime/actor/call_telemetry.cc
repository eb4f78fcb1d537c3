#include "runtime/actor/call_telemetry.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/ascii.h"

namespace skyrl {
namespace {

int64_t UnixMicros(absl::Time t) { return t == absl::InfinitePast() ? 0 : absl::ToUnixMicros(t); }

}  // namespace

const std::vector<double>& CallTelemetry::LatencyBounds() {
  // From a ping over loopback (~50 us) to a training step (minutes).
  static const std::vector<double> bounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                             0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5,
                                             5,      10,      30,     60,    120,    300};
  return bounds;
}

CallTelemetry::CallTelemetry(size_t ring, bool enabled) : enabled_(enabled), ring_size_(enabled ? ring : 0) {
  // Microseconds, as records are: a call's latency is bucketed by integer compares.
  for (double b : LatencyBounds()) bounds_us_.push_back(static_cast<int64_t>(b * 1e6 + 0.5));
  ring_.reserve(ring_size_);
  methods_.reserve(kMaxMethods);  // never moved while the lock is held
}

bool CallTelemetry::EnabledByEnvironment() {
  const char* v = std::getenv("SKYRL_CALL_TELEMETRY");
  if (v == nullptr) return true;
  const std::string s = absl::AsciiStrToLower(v);
  return s != "0" && s != "off" && s != "false";
}

int CallTelemetry::Slot(absl::string_view method) {
  if (!enabled_) return -1;
  SpinLockHolder lock(&mu_);
  return SlotLocked(method);
}

int CallTelemetry::SlotLocked(absl::string_view method) {
  // Calls come in runs of one method (a loop of generate, of train): the last one first.
  if (last_slot_ >= 0 && method == methods_[static_cast<size_t>(last_slot_)].name) return last_slot_;
  if (auto it = slots_.find(method); it != slots_.end()) return last_slot_ = it->second;
  const bool full = methods_.size() >= kMaxMethods - 1;
  const std::string name = full ? std::string(kOtherMethod) : std::string(method);
  if (auto it = slots_.find(name); it != slots_.end()) return it->second;
  const int slot = static_cast<int>(methods_.size());
  Method& m = methods_.emplace_back();
  m.name = name;
  m.buckets.assign(LatencyBounds().size() + 1, 0);
  slots_.emplace(name, slot);
  return slot;
}

CallTelemetry::Rec CallTelemetry::MakeRec(absl::Time arrived, absl::Time started, absl::Time ended,
                                          int code) const {
  Rec r{-1,
        code < 0 || code >= kCodes ? 2 : code,  // others: UNKNOWN
        UnixMicros(arrived),
        UnixMicros(started),
        UnixMicros(ended),
        0};
  const int64_t us = std::max<int64_t>(0, r.end_us - r.arrived_us);
  r.bucket =
      static_cast<int32_t>(std::lower_bound(bounds_us_.begin(), bounds_us_.end(), us) - bounds_us_.begin());
  return r;
}

void CallTelemetry::Record(absl::string_view method, absl::Time arrived, absl::Time started, absl::Time ended,
                           int code) {
  if (!enabled_) return;
  Rec rec = MakeRec(arrived, started, ended, code);  // the arithmetic outside the lock
  SpinLockHolder lock(&mu_);
  rec.slot = SlotLocked(method);
  RecordLocked(rec);
}

void CallTelemetry::Record(int slot, absl::Time arrived, absl::Time started, absl::Time ended, int code) {
  if (!enabled_ || slot < 0) return;
  Rec rec = MakeRec(arrived, started, ended, code);
  rec.slot = slot;
  SpinLockHolder lock(&mu_);
  if (static_cast<size_t>(slot) >= methods_.size()) return;
  RecordLocked(rec);
}

void CallTelemetry::RecordLocked(const Rec& rec) {
  Method& m = methods_[static_cast<size_t>(rec.slot)];
  ++m.by_code[rec.code];
  ++m.buckets[static_cast<size_t>(rec.bucket)];
  m.sum_us += std::max<int64_t>(0, rec.end_us - rec.arrived_us);
  if (ring_size_ == 0) return;
  if (ring_.size() < ring_size_) {
    ring_.push_back(rec);
  } else {
    ring_[recorded_ % ring_size_] = rec;
  }
  ++recorded_;
}

v1::ActorTelemetryReply CallTelemetry::Snapshot(bool with_records) const {
  // Copied under the lock (the recording thread spins meanwhile) into space allocated before it,
  // and turned into the reply after. Names need no copy: a method's name is set before its slot
  // is published under the lock, never changes, and methods_ never reallocates.
  const size_t n_buckets = LatencyBounds().size() + 1;
  struct Counts {
    uint64_t by_code[kCodes];
    int64_t sum_us;
  };
  std::vector<Counts> counts(kMaxMethods);
  std::vector<uint64_t> buckets(kMaxMethods * n_buckets);
  std::vector<Rec> ring(with_records ? ring_size_ : 0);
  size_t n_methods = 0, n_ring = 0;
  uint64_t recorded = 0;
  {
    SpinLockHolder lock(&mu_);
    n_methods = std::min(methods_.size(), kMaxMethods);
    for (size_t i = 0; i < n_methods; ++i) {
      const Method& m = methods_[i];
      std::copy(std::begin(m.by_code), std::end(m.by_code), counts[i].by_code);
      counts[i].sum_us = m.sum_us;
      std::copy(m.buckets.begin(), m.buckets.end(), buckets.begin() + static_cast<ptrdiff_t>(i * n_buckets));
    }
    if (with_records) {
      recorded = recorded_;
      n_ring = std::min(ring_.size(), ring.size());
      // Oldest first: once the ring has wrapped, the oldest is the one to be overwritten next.
      const size_t first = ring_.size() < ring_size_ || ring_size_ == 0 ? 0 : recorded_ % ring_size_;
      const auto at = [this](size_t i) { return ring_.begin() + static_cast<ptrdiff_t>(i); };
      std::copy(at(0), at(first), std::copy(at(first), at(n_ring), ring.begin()));
    }
  }
  ring.resize(n_ring);
  v1::ActorTelemetryReply out;
  out.set_enabled(enabled_);
  for (double b : LatencyBounds()) out.add_latency_bounds_s(b);
  for (size_t i = 0; i < n_methods; ++i) {
    v1::MethodCallStats* s = out.add_methods();
    s->set_method(methods_[i].name);
    for (int code = 0; code < kCodes; ++code)
      if (counts[i].by_code[code] > 0) (*s->mutable_calls_by_code())[code] = counts[i].by_code[code];
    for (size_t b = 0; b < n_buckets; ++b) s->add_latency_counts(buckets[i * n_buckets + b]);
    s->set_latency_sum_s(static_cast<double>(counts[i].sum_us) * 1e-6);
  }
  if (!with_records) return out;
  out.set_records_dropped(recorded - ring.size());
  for (const Rec& r : ring) {
    v1::CallRecord* c = out.add_records();
    c->set_method(methods_[static_cast<size_t>(r.slot)].name);
    c->set_arrived_unix_us(r.arrived_us);
    c->set_start_unix_us(r.start_us);
    c->set_end_unix_us(r.end_us);
    c->set_code(r.code);
  }
  return out;
}

}  // namespace skyrl
