#include "runtime/client/call_stream.h"

#include <algorithm>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"

namespace skyrl::client_internal {
namespace {

CallResult ToResult(v1::StreamedResult& r) {
  if (r.code() == 0) return std::move(*r.mutable_result());
  absl::StatusCode code =
      r.code() > 0 && r.code() <= 16 ? absl::StatusCode(r.code()) : absl::StatusCode::kUnknown;
  absl::Status s(code, r.message());
  s.SetPayload(kFromActorPayload, absl::Cord("1"));
  return s;
}

}  // namespace

CallStream::CallStream(std::shared_ptr<v1::ActorService::Stub> stub,
                       std::shared_ptr<std::atomic<uint64_t>> next_seq, CallStreamOptions options)
    : stub_(std::move(stub)), next_seq_(std::move(next_seq)), options_(std::move(options)) {
  // The token and ids travel once per stream, not once per call.
  rpc::AttachToken(&ctx_, options_.token);
  ctx_.AddMetadata(rpc::kStreamActorIdKey, options_.actor_id);
  if (!options_.caller_id.empty()) ctx_.AddMetadata(rpc::kStreamCallerIdKey, options_.caller_id);
  queued_.emplace_back();
}

std::shared_ptr<CallStream> CallStream::Create(std::shared_ptr<v1::ActorService::Stub> stub,
                                               std::shared_ptr<std::atomic<uint64_t>> next_seq,
                                               CallStreamOptions options) {
  std::shared_ptr<CallStream> s(new CallStream(std::move(stub), std::move(next_seq), std::move(options)));
  s->self_ = s;
  return s;
}

void CallStream::Start() {
  stub_->async()->CallStream(&ctx_, this);
  StartRead(&in_);
  // Writes start from callers' threads, outside any reaction: the hold keeps OnDone from
  // running until the stream has ended and no write is in flight.
  AddHold();
  StartCall();
}

bool CallStream::Enqueue(absl::string_view method, absl::string_view args, absl::Duration timeout,
                         CallDone& done) {
  bool write, earliest = false;
  const absl::Time deadline = absl::Now() + timeout;
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return false;
    const uint64_t id = first_id_ + slots_.size();
    if (deadline != absl::InfiniteFuture()) {
      while (!deadlines_.empty() && SettledLocked(deadlines_.top().second)) deadlines_.pop();
      earliest = deadlines_.empty() || deadline < deadlines_.top().first;
      deadlines_.emplace(deadline, id);
    }
    Slot& slot = slots_.emplace_back();
    slot.done = std::move(done);
    slot.timeout = timeout;
    slot.method.assign(method.data(), method.size());
    // Parts, when the args do not fit in one message: consecutive in the queue (under mu_),
    // so they go out in order; the first carries the method, sequence and timeout.
    const size_t part = options_.max_message_bytes - kCallOverhead - method.size();
    size_t offset = 0;
    do {
      const size_t n = std::min(part, args.size() - offset);
      const size_t bytes = n + kCallOverhead + (offset == 0 ? method.size() : 0);
      if (queued_.back().msg.calls_size() > 0 && queued_.back().bytes + bytes > options_.max_message_bytes)
        queued_.emplace_back();
      OutBatch& batch = queued_.back();
      v1::StreamedCall* call = batch.msg.add_calls();  // reuses a cleared element when there is one
      call->set_call_id(id);
      call->mutable_args()->assign(args.data() + offset, n);
      if (offset == 0) {
        call->mutable_method()->assign(method.data(), method.size());
        // Assigned under mu_, so the sequence is the order calls go out on this stream.
        call->set_seq(next_seq_->fetch_add(1));
        call->set_timeout_ms(timeout == absl::InfiniteDuration()
                                 ? 0
                                 : uint64_t(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout))));
      }
      offset += n;
      call->set_more(offset < args.size());
      batch.bytes += bytes;
    } while (offset < args.size());
    write = TakeBatchLocked();
  }
  if (write) StartWrite(&out_);
  if (earliest && options_.on_earlier_deadline) options_.on_earlier_deadline(deadline);
  return true;
}

bool CallStream::SettledLocked(uint64_t id) const {
  return id < first_id_ || id - first_id_ >= slots_.size() || slots_[id - first_id_].answered;
}

bool CallStream::TakeBatchLocked() {
  if (writing_ || ended_ || queued_.front().msg.calls_size() == 0) return false;
  OutBatch& front = queued_.front();
  out_.Swap(&front.msg);  // out_ takes the calls; front takes the batch written before
  if (queued_.size() > 1) {
    queued_.pop_front();
  } else {
    front.msg.Clear();  // keeps its elements allocated for the next calls
    front.bytes = 0;
  }
  writing_ = true;
  return true;
}

bool CallStream::ReleaseHoldLocked() {
  if (!ended_ || writing_ || hold_released_) return false;
  hold_released_ = true;
  return true;
}

void CallStream::PopAnsweredLocked() {
  while (!slots_.empty() && slots_.front().answered) {
    slots_.pop_front();
    ++first_id_;
  }
}

void CallStream::OnWriteDone(bool ok) {
  bool write = false, release;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      ended_ = true;  // the RPC is over; OnDone says how
    } else {
      write = TakeBatchLocked();
    }
    release = ReleaseHoldLocked();
  }
  if (write) StartWrite(&out_);
  if (release) RemoveHold();
}

void CallStream::OnReadDone(bool ok) {
  if (!ok) {
    bool release;
    {
      absl::MutexLock lock(&mu_);
      ended_ = true;
      release = ReleaseHoldLocked();
    }
    if (release) RemoveHold();
    return;
  }
  completions_.clear();
  {
    absl::MutexLock lock(&mu_);
    for (v1::StreamedResult& r : *in_.mutable_results()) {
      const uint64_t id = r.call_id();
      // Unknown ids: calls that already failed (deadline) and were popped.
      if (id < first_id_ || id - first_id_ >= slots_.size()) continue;
      Slot& slot = slots_[id - first_id_];
      if (slot.answered) continue;
      if (options_.max_result_bytes > 0 &&
          slot.parts.size() + r.result().size() > options_.max_result_bytes) {
        // Not assembled: over this client's limit (ClientOptions.max_call_bytes).
        slot.answered = true;
        slot.parts = std::string();
        completions_.emplace_back(std::move(slot.done),
                                  absl::ResourceExhaustedError(absl::StrCat(
                                      "actor ", options_.actor_id, ": the result of \"", slot.method,
                                      "\" is over this client's limit of ", options_.max_result_bytes,
                                      " bytes (ClientOptions.max_call_bytes)")));
        continue;
      }
      if (r.more()) {  // a part of a larger result
        slot.parts.append(r.result());
        continue;
      }
      slot.answered = true;
      CallResult result = ToResult(r);
      if (!slot.parts.empty() && result.ok()) {
        slot.parts.append(*result);
        result = std::move(slot.parts);
      }
      slot.parts = std::string();
      completions_.emplace_back(std::move(slot.done), std::move(result));
    }
    PopAnsweredLocked();
  }
  // Completed outside mu_: a waiter may call again at once.
  for (auto& [done, result] : completions_) done(std::move(result));
  completions_.clear();
  StartRead(&in_);
}

absl::Time CallStream::Expire(absl::Time now, bool* expired_any) {
  std::vector<std::pair<CallDone, absl::Status>> expired;
  absl::Time earliest = absl::InfiniteFuture();
  {
    absl::MutexLock lock(&mu_);
    while (!deadlines_.empty() && deadlines_.top().first <= now) {
      const uint64_t id = deadlines_.top().second;
      deadlines_.pop();
      if (SettledLocked(id)) continue;  // answered before its deadline
      Slot& slot = slots_[id - first_id_];
      slot.answered = true;
      slot.parts = std::string();  // a result arriving in parts is not wanted any more
      expired.emplace_back(std::move(slot.done),
                           absl::DeadlineExceededError(
                               absl::StrCat("actor ", options_.actor_id, ": call to \"", slot.method,
                                            "\" got no result within ", absl::FormatDuration(slot.timeout))));
    }
    // Answered calls leave the heap lazily; drop those on top so that an idle stream does not
    // wake the expiry loop once per stale deadline.
    while (!deadlines_.empty() && SettledLocked(deadlines_.top().second)) deadlines_.pop();
    if (!deadlines_.empty()) earliest = deadlines_.top().first;
    PopAnsweredLocked();
  }
  if (expired_any != nullptr) *expired_any = !expired.empty();
  for (auto& [done, status] : expired) done(status);
  return earliest;
}

std::vector<CallDone> CallStream::TakeUnansweredLocked() {
  ended_ = true;
  std::vector<CallDone> unanswered;
  for (Slot& slot : slots_)
    if (!slot.answered) unanswered.push_back(std::move(slot.done));
  first_id_ += slots_.size();
  slots_.clear();
  deadlines_ = {};
  return unanswered;
}

void CallStream::Shutdown(const absl::Status& why) {
  std::vector<CallDone> unanswered;
  bool release, cancel;
  {
    absl::MutexLock lock(&mu_);
    unanswered = TakeUnansweredLocked();
    release = ReleaseHoldLocked();
    cancel = !done_;
  }
  for (auto& done : unanswered) done(why);
  // The context holds its own reference to the call, so cancelling a finished call is harmless.
  if (cancel) ctx_.TryCancel();
  if (release) RemoveHold();
}

bool CallStream::ended() {
  absl::MutexLock lock(&mu_);
  return ended_;
}

void CallStream::OnDone(const grpc::Status& status) {
  StreamEnd end{nullptr, options_.actor_id, options_.address, status, {}};
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
    end.unanswered = TakeUnansweredLocked();
    end.stream = std::move(self_);
  }
  options_.on_end(std::move(end));
}

}  // namespace skyrl::client_internal
