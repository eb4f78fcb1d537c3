#include "runtime/actor/actor_service.h"

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/status.h"

namespace skyrl {
namespace {

// Upper bound of what one StreamedResult adds to its batch besides its result and message
// bytes: field tags, length prefixes, call id and code.
constexpr size_t kResultOverhead = 64;
constexpr size_t kMaxCallerIdBytes = 128;

absl::string_view View(const grpc::string_ref& s) { return absl::string_view(s.data(), s.size()); }

// Error messages longer than this are cut: they travel in one message, with no parts.
constexpr size_t kMaxErrorMessageBytes = 64 << 10;
// Calls whose args are still arriving in parts, per stream: more are refused (each answered
// once, when its last part is in), and past kMaxPartEntries a call's parts are dropped and it
// is answered RESOURCE_EXHAUSTED at its last: a caller cannot grow a host without bound.
constexpr size_t kMaxPartialCalls = 16;
constexpr size_t kMaxPartEntries = 1024;

// RESOURCE_EXHAUSTED for a unary result that cannot fit in one message (gRPC would fail the
// RPC with a less helpful error); else OK. Streamed results go in parts instead.
absl::Status CheckUnaryResultSize(size_t result_bytes) {
  if (result_bytes + kResultOverhead <= size_t(rpc::kMaxMessageBytes)) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("the result of ", result_bytes, " bytes does not fit in one message (limit ",
                   rpc::kMaxMessageBytes, " bytes; a CallStream takes larger ones)"));
}

// RESOURCE_EXHAUSTED for a streamed result over the actor's limit on one call's bytes; else OK.
absl::Status CheckStreamResultSize(size_t result_bytes, size_t limit) {
  if (result_bytes <= limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("the result of ", result_bytes, " bytes is over this actor's limit of ", limit, " bytes"));
}

}  // namespace

// One CallStream. Reads batches of calls and hands them to the executors; collects their
// results and writes them back, everything finished since the last write in one message.
//
// Lifetime: reference counted (gRPC's reference until OnDone, one per call handed to an
// executor, StopStreams' while it stops it); the last Unref deletes it. gRPC operations are
// never started with mu_ held. Invariants: at most one read and one write in flight; Finish
// is called once, never while a write is in flight nor between a read's completion and the
// next StartRead (so no operation is ever started on a finished RPC).
class ActorServiceImpl::Stream final
    : public grpc::ServerBidiReactor<v1::ActorCallBatch, v1::ActorResultBatch> {
 public:
  Stream(ActorServiceImpl* svc, grpc::CallbackServerContext* ctx) : svc_(svc) {
    const auto& md = ctx->client_metadata();
    std::optional<absl::string_view> actor_id;
    if (auto id = md.find(rpc::kStreamActorIdKey); id != md.end()) actor_id = View(id->second);
    absl::string_view caller;
    if (auto c = md.find(rpc::kStreamCallerIdKey); c != md.end()) caller = View(c->second);
    grpc::Status reject =
        svc->AdmitCaller(ctx, absl::StrCat("stream metadata ", rpc::kStreamActorIdKey), actor_id,
                         absl::StrCat("stream metadata ", rpc::kStreamCallerIdKey), caller);
    if (reject.ok()) caller_id_ = std::string(caller);
    if (reject.ok()) {
      absl::MutexLock lock(&svc->streams_mu_);
      if (svc->streams_stopped_)
        reject = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                              absl::StrCat("actor ", svc->actor_id_, " is stopping"));
      else
        svc->streams_.insert(this);
    }
    if (!reject.ok()) {
      {
        absl::MutexLock lock(&mu_);
        finished_ = true;
      }
      Finish(reject);
      return;
    }
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the caller half-closed, or the RPC is over
      Step step;
      {
        absl::MutexLock lock(&mu_);
        read_done_ = true;
        step = NextLocked();
      }
      Run(step);
      return;
    }
    works_.clear();
    {
      absl::MutexLock lock(&mu_);
      in_read_ = true;
      absl::Time now = absl::Now();
      for (v1::StreamedCall& call : *in_.mutable_calls()) {
        if (cancelled_ || stopping_) break;
        bool too_many = false;
        if (!TakePartLocked(call, &too_many)) continue;  // more parts of it to come
        grpc::Status refusal;
        Work& w = works_.emplace_back();
        if (!svc_->AdmitCall(call.method(), caller_id_, call.seq(), now, w, &refusal)) {
          works_.pop_back();
          AddResultLocked(call.call_id(), refusal.error_code(), refusal.error_message(), {});
          continue;
        }
        w.stream = this;
        w.call_id = call.call_id();
        if ((too_many || call.args().size() > svc_->limits_.max_call_bytes) && w.method != nullptr) {
          // Still takes its turn in its caller's sequence, as an unknown method does.
          w.method = nullptr;
          w.refusal = absl::ResourceExhaustedError(
              too_many ? absl::StrCat("call ", call.call_id(), ": more than ", kMaxPartialCalls,
                                      " calls arriving in parts at once")
                       : absl::StrCat("call ", call.call_id(), " to \"", call.method().substr(0, 128),
                                      "\": args of more than ", svc_->limits_.max_call_bytes,
                                      " bytes, this actor's limit"));
          call.clear_args();
        }
        w.args = std::move(*call.mutable_args());
        if (call.timeout_ms() > 0)
          w.deadline = now + absl::Milliseconds(std::min<uint64_t>(call.timeout_ms(), uint64_t{1} << 40));
        ++outstanding_;
        ++refs_;
      }
    }
    svc_->Enqueue(works_);
    StartRead(&in_);
    Step step;
    {
      absl::MutexLock lock(&mu_);
      in_read_ = false;
      step = NextLocked();
    }
    Run(step);
  }

  void OnWriteDone(bool ok) override {
    Step step;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) {  // the caller is gone: nothing more can reach it
        cancelled_ = true;
        dropping_.store(true, std::memory_order_relaxed);
      }
      step = NextLocked();
    }
    Run(step);
  }

  void OnCancel() override {
    Step step;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      dropping_.store(true, std::memory_order_relaxed);
      step = NextLocked();
    }
    Run(step);
  }

  void OnDone() override {
    {
      absl::MutexLock lock(&svc_->streams_mu_);
      svc_->streams_.erase(this);
    }
    Unref();
  }

  // From an executor: the outcome of call `call_id`. Releases that call's reference.
  void Deliver(uint64_t call_id, const absl::Status& status, std::string result) {
    Step step;
    {
      absl::MutexLock lock(&mu_);
      --outstanding_;
      if (!finished_ && !cancelled_)
        AddResultLocked(call_id, int(status.code()), status.message(), std::move(result));
      step = NextLocked();
    }
    Run(step);
    Unref();
  }

  // From an executor: a call that will never run (the stream is stopping or cancelled).
  void Drop() {
    Step step;
    {
      absl::MutexLock lock(&mu_);
      --outstanding_;
      step = NextLocked();
    }
    Run(step);
    Unref();
  }

  void Stop() {
    Step step;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      dropping_.store(true, std::memory_order_relaxed);
      step = NextLocked();
    }
    Run(step);
  }

  // Stopping or cancelled: calls still queued are not run.
  bool Dropping() const { return dropping_.load(std::memory_order_relaxed); }

  void Ref() {
    absl::MutexLock lock(&mu_);
    ++refs_;
  }
  void Unref() {
    bool last;
    {
      absl::MutexLock lock(&mu_);
      last = --refs_ == 0;
    }
    if (last) delete this;
  }

 private:
  enum class Step { kNone, kWrite, kFinish };

  // Under mu_, for the reader: takes one StreamedCall. True when `call` is now a whole call
  // (it was one, or it was the last part and now holds every part's args); false when it was
  // a part kept until the rest arrives. A call's args stop growing past max_call_bytes (it
  // is refused when whole). A call that opens while kMaxPartialCalls others are arriving
  // keeps no args and is refused when whole (`too_many`).
  bool TakePartLocked(v1::StreamedCall& call, bool* too_many) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = partial_.find(call.call_id());
    if (it == partial_.end()) {
      if (dropped_parts_ && call.method().empty()) {
        // A later part of a call whose first part was dropped: answered once, at its last.
        if (!call.more())
          AddResultLocked(call.call_id(), int(absl::StatusCode::kResourceExhausted),
                          absl::StrCat("call ", call.call_id(), ": its first part was dropped (more than ",
                                       kMaxPartEntries, " calls arriving in parts)"),
                          {});
        return false;
      }
      if (!call.more()) return true;
      if (partial_.size() >= kMaxPartEntries) {
        dropped_parts_ = true;
        return false;
      }
      Partial& p = partial_[call.call_id()];
      p.refused = open_partials_ >= kMaxPartialCalls;
      if (p.refused) {
        call.clear_args();
      } else {
        ++open_partials_;
      }
      p.first = std::move(call);
      return false;
    }
    Partial& p = it->second;
    if (!p.refused && p.first.args().size() <= svc_->limits_.max_call_bytes)
      p.first.mutable_args()->append(call.args());
    if (call.more()) return false;
    *too_many = p.refused;
    if (!p.refused) --open_partials_;
    call = std::move(p.first);
    partial_.erase(it);
    return true;
  }

  // Decides the next operation under mu_; Run starts it after mu_ is released.
  Step NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || writing_) return Step::kNone;
    if (cancelled_) {
      if (in_read_) return Step::kNone;
      finished_ = true;
      finish_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "call stream cancelled");
      return Step::kFinish;
    }
    if (!pending_.empty() && pending_.front().msg.results_size() > 0) {
      PendingBatch& front = pending_.front();
      out_.Swap(&front.msg);  // out_ takes the results; front takes the old, written batch
      if (pending_.size() > 1) {
        pending_.pop_front();
      } else {
        front.msg.Clear();  // keeps its elements allocated for the next results
        front.bytes = 0;
      }
      writing_ = true;
      return Step::kWrite;
    }
    if (outstanding_ == 0 && (read_done_ || stopping_) && !in_read_) {
      finished_ = true;
      finish_status_ = stopping_ ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                                absl::StrCat("actor ", svc_->actor_id_, " is stopping"))
                                 : grpc::Status::OK;
      return Step::kFinish;
    }
    return Step::kNone;
  }

  void Run(Step step) {
    if (step == Step::kWrite) StartWrite(&out_);
    if (step == Step::kFinish) Finish(finish_status_);
  }

  // Queues the outcome of call `call_id` for writing: one StreamedResult, or several parts
  // (each in a message of its own when it fills one) for a result larger than a message.
  void AddResultLocked(uint64_t call_id, int code, absl::string_view message, std::string result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // Execute has checked the result's size (CheckStreamResultSize) before counting its code.
    if (message.size() > kMaxErrorMessageBytes) message = message.substr(0, kMaxErrorMessageBytes);
    const size_t limit = svc_->limits_.message_bytes;
    const size_t part = limit - kResultOverhead;
    if (result.size() <= part) {
      AddPartLocked(call_id, code, message, std::move(result), false);
      return;
    }
    for (size_t offset = 0; offset < result.size(); offset += part)
      AddPartLocked(call_id, code, message, result.substr(offset, part), offset + part < result.size());
  }

  void AddPartLocked(uint64_t call_id, int code, absl::string_view message, std::string result, bool more)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    size_t bytes = result.size() + message.size() + kResultOverhead;
    if (pending_.empty() || pending_.back().bytes + bytes > svc_->limits_.message_bytes)
      pending_.emplace_back();
    PendingBatch& batch = pending_.back();
    v1::StreamedResult* r = batch.msg.add_results();
    r->set_call_id(call_id);
    r->set_code(code);
    if (code != 0) r->set_message(std::string(message));
    r->set_result(std::move(result));
    r->set_more(more);
    batch.bytes += bytes;
  }

  struct PendingBatch {
    v1::ActorResultBatch msg;
    size_t bytes = 0;
  };

  ActorServiceImpl* const svc_;
  std::string caller_id_;     // set in the constructor, then read-only
  v1::ActorCallBatch in_;     // the reader's (one read in flight at a time)
  v1::ActorResultBatch out_;  // the writer's (one write in flight at a time)
  std::vector<Work> works_;   // the reader's scratch
  // Calls whose args arrive in parts, by call id: the first part, holding the args so far
  // (none when refused for too many at once).
  struct Partial {
    v1::StreamedCall first;
    bool refused = false;
  };
  absl::flat_hash_map<uint64_t, Partial> partial_ ABSL_GUARDED_BY(mu_);
  size_t open_partials_ ABSL_GUARDED_BY(mu_) = 0;    // entries of partial_ not refused
  bool dropped_parts_ ABSL_GUARDED_BY(mu_) = false;  // a first part was dropped (kMaxPartEntries)
  std::atomic<bool> dropping_{false};
  grpc::Status finish_status_;  // set once, with finished_
  absl::Mutex mu_;
  std::deque<PendingBatch> pending_ ABSL_GUARDED_BY(mu_);  // results not yet written
  int refs_ ABSL_GUARDED_BY(mu_) = 1;                      // gRPC's, until OnDone
  int outstanding_ ABSL_GUARDED_BY(mu_) = 0;               // calls handed to executors
  bool in_read_ ABSL_GUARDED_BY(mu_) = false;              // OnReadDone runs; the next StartRead is due
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool read_done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

ActorServiceImpl::ActorServiceImpl(std::string actor_id, const ActorClass& cls, Actor& actor,
                                   const rpc::TokenAuth& auth, int max_concurrency, CallLimits limits,
                                   TelemetryOptions telemetry)
    : actor_id_(std::move(actor_id)),
      cls_(cls),
      actor_(actor),
      auth_(auth),
      limit_(max_concurrency),
      limits_{std::clamp<size_t>(limits.message_bytes, 4096, rpc::kMaxMessageBytes), limits.max_call_bytes},
      telemetry_(telemetry.ring, telemetry.enabled) {
  absl::MutexLock lock(&mu_);
  for (int i = 0; i < std::min(limit_, kEagerExecutors); ++i) executors_.emplace_back([this] { Execute(); });
}

ActorServiceImpl::~ActorServiceImpl() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  std::vector<std::thread> executors;
  {
    absl::MutexLock lock(&mu_);
    executors.swap(executors_);
  }
  for (auto& t : executors) t.join();
  // The server is shut down: every stream is finished, and only its references remain.
  std::vector<Stream*> left;
  {
    absl::MutexLock lock(&mu_);
    for (Work& w : queue_)
      if (w.stream != nullptr) left.push_back(w.stream);
    queue_.clear();
  }
  for (Stream* s : left) s->Drop();
}

const ActorMethod* ActorServiceImpl::FindMethod(absl::string_view name, grpc::Status* error) const {
  auto it = cls_.methods.find(std::string(name));
  if (it != cls_.methods.end()) return &it->second;
  if (cls_.any_method) {
    absl::MutexLock lock(&any_mu_);
    // Bounded: a caller naming ever new methods must not grow the host without limit.
    constexpr size_t kMaxAnyMethods = 4096;
    if (any_methods_.size() >= kMaxAnyMethods && any_methods_.find(name) == any_methods_.end()) {
      *error = grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                            absl::StrCat("actor class ", cls_.name, ": more than ", kMaxAnyMethods,
                                         " distinct method names called"));
      return nullptr;
    }
    auto [bound, added] = any_methods_.try_emplace(std::string(name));
    if (added) {
      bound->second = std::make_unique<ActorMethod>(
          [any = cls_.any_method, method = std::string(name)](Actor& self, absl::string_view args) {
            return any(self, method, args);
          });
    }
    return bound->second.get();
  }
  std::vector<std::string> names;
  for (const auto& [n, m] : cls_.methods) names.push_back(n);
  *error = grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        absl::StrCat("actor class ", cls_.name, " has no method \"", name.substr(0, 128),
                                     "\" (it has: ", absl::StrJoin(names, ", "), ")"));
  return nullptr;
}

grpc::Status ActorServiceImpl::AdmitCaller(grpc::CallbackServerContext* ctx, absl::string_view actor_field,
                                           std::optional<absl::string_view> actor_id,
                                           absl::string_view caller_field,
                                           absl::string_view caller_id) const {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  // Absent and empty are refused alike, whichever path (unary field or stream metadata).
  if (!actor_id || actor_id->empty())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat(actor_field, " is missing"));
  if (*actor_id != actor_id_)
    return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("this process hosts actor ", actor_id_,
                                                                  ", not ", actor_id->substr(0, 64)));
  if (caller_id.size() > kMaxCallerIdBytes)
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat(caller_field, " is ", caller_id.size(), " bytes (at most ", kMaxCallerIdBytes, ")"));
  return grpc::Status::OK;
}

bool ActorServiceImpl::AdmitCall(absl::string_view method_name, absl::string_view caller, uint64_t seq,
                                 absl::Time now, Work& w, grpc::Status* refusal) {
  const ActorMethod* method = FindMethod(method_name, refusal);
  const bool ordered = limit_ == 1 && seq > 0 && !caller.empty();
  // Unknown names are counted too (under their name, up to the telemetry's limit).
  // An unknown method still takes its turn in its caller's sequence, or its successors would
  // wait for it; unordered, it is answered at once.
  if (method == nullptr && !ordered) {
    telemetry_.Record(method_name, now, absl::InfinitePast(), now, refusal->error_code());
    return false;
  }
  if (telemetry_.enabled()) w.method_name.assign(method_name.data(), method_name.size());
  w.method = method;
  if (method == nullptr) w.refusal = rpc::FromGrpc(*refusal);
  w.caller = caller;
  w.seq = seq;
  w.ordered = ordered;
  w.arrived = now;
  return true;
}

grpc::ServerUnaryReactor* ActorServiceImpl::Call(grpc::CallbackServerContext* ctx,
                                                 const v1::ActorCallRequest* req, v1::ActorCallReply* reply) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::optional<absl::string_view> actor_id;
  if (!req->actor_id().empty()) actor_id = req->actor_id();
  if (grpc::Status s = AdmitCaller(ctx, "ActorCallRequest.actor_id", actor_id, "ActorCallRequest.caller_id",
                                   req->caller_id());
      !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  std::vector<Work> one(1);
  Work& w = one[0];
  grpc::Status refusal;
  if (!AdmitCall(req->method(), req->caller_id(), req->seq(), absl::Now(), w, &refusal)) {
    reactor->Finish(refusal);
    return reactor;
  }
  w.req = req;
  w.reply = reply;
  w.unary = reactor;
  Enqueue(one);
  return reactor;
}

grpc::ServerBidiReactor<v1::ActorCallBatch, v1::ActorResultBatch>* ActorServiceImpl::CallStream(
    grpc::CallbackServerContext* ctx) {
  return new Stream(this, ctx);
}

v1::ActorTelemetryReply ActorServiceImpl::TelemetrySnapshot(bool with_records) {
  v1::ActorTelemetryReply out = telemetry_.Snapshot(with_records);
  out.set_class_name(cls_.name);
  out.set_running(running_.load(std::memory_order_relaxed));
  absl::MutexLock lock(&mu_);
  out.set_queued(static_cast<int64_t>(queue_.size()));
  return out;
}

grpc::ServerUnaryReactor* ActorServiceImpl::Telemetry(grpc::CallbackServerContext* ctx,
                                                      const v1::ActorTelemetryRequest* req,
                                                      v1::ActorTelemetryReply* reply) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::optional<absl::string_view> actor_id;
  if (!req->actor_id().empty()) actor_id = req->actor_id();
  grpc::Status s = AdmitCaller(ctx, "ActorTelemetryRequest.actor_id", actor_id, "", "");
  if (s.ok()) *reply = TelemetrySnapshot(req->with_records());
  reactor->Finish(s);
  return reactor;
}

void ActorServiceImpl::StopStreams() {
  std::vector<Stream*> open;
  {
    absl::MutexLock lock(&streams_mu_);
    streams_stopped_ = true;
    for (Stream* s : streams_) {
      s->Ref();
      open.push_back(s);
    }
  }
  for (Stream* s : open) {
    s->Stop();
    s->Unref();
  }
}

void ActorServiceImpl::Enqueue(std::vector<Work>& works) {
  if (works.empty()) return;
  {
    absl::MutexLock lock(&mu_);
    for (Work& w : works) queue_.push_back(std::move(w));
    // More executors while calls outnumber the idle ones (never past limit_, never stopping).
    for (int missing = static_cast<int>(works.size()) - idle_;
         missing > 0 && !stopping_ && static_cast<int>(executors_.size()) < limit_; --missing)
      executors_.emplace_back([this] { Execute(); });
  }
  if (works.size() == 1 || limit_ == 1) {
    cv_.Signal();
  } else {
    cv_.SignalAll();
  }
  works.clear();
}

// A call may run when it is not ordered, when it is its caller's next, or when a missing
// predecessor (cancelled before it was sent) has held the line for kOrderWait.
bool ActorServiceImpl::Runnable(const Work& w, absl::Time now) const {
  if (!w.ordered) return true;
  auto next = next_seq_.find(w.caller);
  uint64_t want = next == next_seq_.end() ? 1 : next->second;
  return w.seq <= want || now - w.arrived >= kOrderWait;
}

void ActorServiceImpl::Execute() {
  while (true) {
    Work w;
    {
      absl::MutexLock lock(&mu_);
      while (true) {
        if (stopping_) return;
        absl::Time now = absl::Now();
        auto it = std::find_if(queue_.begin(), queue_.end(), [&](const Work& x) {
          mu_.AssertHeld();
          return Runnable(x, now);
        });
        if (it != queue_.end()) {
          w = std::move(*it);
          queue_.erase(it);
          break;
        }
        // Nothing runnable: wait for a new call or a finished one; re-check the order
        // timeouts now and then while calls wait for a predecessor.
        ++idle_;
        if (queue_.empty()) {
          cv_.Wait(&mu_);
        } else {
          cv_.WaitWithTimeout(&mu_, absl::Milliseconds(50));
        }
        --idle_;
      }
    }
    absl::StatusOr<std::string> result;
    bool dropped = w.stream != nullptr && w.stream->Dropping();
    absl::Time started = absl::InfinitePast();
    if (dropped) {
      // Nobody will read the result.
    } else if (w.method == nullptr) {
      result = w.refusal;
    } else if (started = absl::Now(); w.deadline < started) {
      result = absl::DeadlineExceededError(
          absl::StrCat("call ", w.call_id, " waited ", absl::FormatDuration(started - w.arrived),
                       " in actor ", actor_id_, "'s queue, past its timeout; not started"));
      started = absl::InfinitePast();
    } else {
      running_.fetch_add(1, std::memory_order_relaxed);
      result = (*w.method)(actor_,
                           w.unary != nullptr ? absl::string_view(w.req->args()) : absl::string_view(w.args));
      running_.fetch_sub(1, std::memory_order_relaxed);
    }
    // A result too big to send is the caller's RESOURCE_EXHAUSTED, and counted as that.
    if (!dropped && result.ok()) {
      absl::Status size = w.unary != nullptr ? CheckUnaryResultSize(result->size())
                                             : CheckStreamResultSize(result->size(), limits_.max_call_bytes);
      if (!size.ok()) result = std::move(size);
    }
    if (!dropped && telemetry_.enabled())
      telemetry_.Record(w.method_name, w.arrived, started, absl::Now(), int(result.status().code()));
    if (w.ordered) {
      {
        absl::MutexLock lock(&mu_);
        auto next = next_seq_.find(w.caller);
        if (next == next_seq_.end()) next = next_seq_.emplace(std::string(w.caller), 1).first;
        next->second = std::max(next->second, w.seq + 1);
      }
      cv_.SignalAll();  // a successor may be runnable now
    }
    if (w.unary != nullptr) {
      if (result.ok()) {
        w.reply->set_result(std::move(*result));
        w.unary->Finish(grpc::Status::OK);
      } else {
        w.unary->Finish(rpc::ToGrpc(result.status()));
      }
    } else if (dropped) {
      w.stream->Drop();
    } else if (result.ok()) {
      w.stream->Deliver(w.call_id, absl::OkStatus(), std::move(*result));
    } else {
      w.stream->Deliver(w.call_id, result.status(), {});
    }
  }
}

}  // namespace skyrl
