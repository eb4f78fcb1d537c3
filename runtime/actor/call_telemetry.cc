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
  ring_.reserve(ring_size_);
}

bool CallTelemetry::EnabledByEnvironment() {
  const char* v = std::getenv("SKYRL_CALL_TELEMETRY");
  if (v == nullptr) return true;
  const std::string s = absl::AsciiStrToLower(v);
  return s != "0" && s != "off" && s != "false";
}

int CallTelemetry::Slot(absl::string_view method) {
  if (!enabled_) return -1;
  absl::MutexLock lock(&mu_);
  if (auto it = slots_.find(method); it != slots_.end()) return it->second;
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

void CallTelemetry::Record(int slot, absl::Time arrived, absl::Time started, absl::Time ended, int code) {
  if (!enabled_ || slot < 0) return;
  const double seconds = std::max(0.0, absl::ToDoubleSeconds(ended - arrived));
  const std::vector<double>& bounds = LatencyBounds();
  const size_t bucket = std::lower_bound(bounds.begin(), bounds.end(), seconds) - bounds.begin();
  const Rec rec{slot, code, UnixMicros(arrived), UnixMicros(started), UnixMicros(ended)};
  absl::MutexLock lock(&mu_);
  Method& m = methods_[static_cast<size_t>(slot)];
  ++m.by_code[code];
  ++m.buckets[bucket];
  m.sum_s += seconds;
  if (ring_size_ == 0) return;
  if (ring_.size() < ring_size_) {
    ring_.push_back(rec);
  } else {
    ring_[recorded_ % ring_size_] = rec;
  }
  ++recorded_;
}

v1::ActorTelemetryReply CallTelemetry::Snapshot(bool with_records) const {
  v1::ActorTelemetryReply out;
  out.set_enabled(enabled_);
  for (double b : LatencyBounds()) out.add_latency_bounds_s(b);
  absl::MutexLock lock(&mu_);
  for (const Method& m : methods_) {
    v1::MethodCallStats* s = out.add_methods();
    s->set_method(m.name);
    for (const auto& [code, n] : m.by_code) (*s->mutable_calls_by_code())[code] = n;
    for (uint64_t n : m.buckets) s->add_latency_counts(n);
    s->set_latency_sum_s(m.sum_s);
  }
  if (!with_records) return out;
  out.set_records_dropped(recorded_ - ring_.size());
  // Oldest first: once the ring has wrapped, the oldest is the one to be overwritten next.
  const size_t first = ring_.size() < ring_size_ || ring_size_ == 0 ? 0 : recorded_ % ring_size_;
  for (size_t i = 0; i < ring_.size(); ++i) {
    const Rec& r = ring_[(first + i) % ring_.size()];
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
