#include "runtime/worker/head_link.h"

#include <algorithm>
#include <map>
#include <future>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/logging.h"
#include "runtime/common/resources.h"

namespace skyrl::worker {

HeadLink::HeadLink(v1::NodeInfo node, HeadApi& head, HeadApi& probe, PeerApi& peers, LocalActors& actors,
                   const Clock& clock, HeadLinkOptions options)
    : node_(std::move(node)),
      head_(head),
      probe_(probe),
      peers_api_(peers),
      actors_(actors),
      clock_(clock),
      options_(std::move(options)) {
  absl::MutexLock lock(&mu_);
  last_sent_ = clock_.Now();  // the retry window starts now
}

std::string HeadLink::node_id() const {
  absl::MutexLock lock(&mu_);
  return node_id_;
}

bool HeadLink::fenced() const {
  absl::MutexLock lock(&mu_);
  return fenced_;
}

v1::HeadContactReply HeadLink::Contact() {
  v1::HeartbeatRequest req;
  absl::Duration timeout;
  bool registered;
  {
    absl::MutexLock lock(&mu_);
    registered = registered_;
    req.set_node_id(node_id_);
    req.set_peers_version(peers_version_);
    timeout = RequestTimeout();
  }
  bool reaches = false;
  if (registered) {
    const absl::Time sent = clock_.Now();
    absl::StatusOr<v1::HeartbeatReply> reply = probe_.Heartbeat(req, timeout);
    reaches = reply.ok() || absl::IsNotFound(reply.status());  // NotFound: the head answered
    if (reply.ok()) {
      absl::MutexLock lock(&mu_);
      Reached(sent);
    }
  }
  absl::MutexLock lock(&mu_);
  v1::HeadContactReply r;
  r.set_since_head_contact_ms(last_answer_ ? absl::ToInt64Milliseconds(clock_.Now() - *last_answer_) : -1);
  r.set_fenced(fenced_);
  r.set_reaches_head(reaches);
  return r;
}

absl::Duration HeadLink::LeaseTerm() const { return death_after_ * 9 / 10; }

absl::Duration HeadLink::RequestTimeout() const {
  if (death_after_ == absl::ZeroDuration()) return absl::Seconds(5);
  return std::clamp(death_after_ / 10, absl::Milliseconds(50), absl::Seconds(5));
}

void HeadLink::Reached(absl::Time sent) {
  last_sent_ = std::max(last_sent_, sent);
  last_answer_ = clock_.Now();
  cleared_ = false;
  // Within [0, 0.9 T] whatever the wall clock did between the send and the answer.
  actors_.Lease(death_after_ == absl::ZeroDuration() ? absl::InfiniteDuration()
                                                     : std::clamp(last_sent_ + LeaseTerm() - *last_answer_,
                                                                  absl::ZeroDuration(), LeaseTerm()));
  if (fenced_) {
    spdlog::info("the head at {} answers again; this node's actors were fenced and restart through it",
                 options_.head_address);
    fenced_ = false;
  }
}

HeadLink::Step HeadLink::Round() {
  const absl::Time now = clock_.Now();
  bool registered;
  absl::Duration period, timeout;
  {
    absl::MutexLock lock(&mu_);
    if (options_.retry_window > absl::ZeroDuration() && now - last_sent_ > options_.retry_window) {
      spdlog::critical(
          "the head at {} has been unreachable for {:.0f} s (--head-retry-window-s); exiting, which "
          "stops this node's actors",
          options_.head_address, absl::ToDoubleSeconds(options_.retry_window));
      return {absl::ZeroDuration(), 1};
    }
    registered = registered_;
    period = period_;
    timeout = RequestTimeout();
  }
  if (!registered) {
    v1::RegisterNodeRequest req;
    *req.mutable_node() = node_;
    // The actors from before: those to stop if the head declared the node dead (it restarted
    // them elsewhere). Taken when the head said it did not know the node, and kept until a
    // registration succeeds: one the head made but whose reply was lost may have let it start
    // new actors here, and a repeated one must not stop those.
    std::vector<ActorId> before;
    {
      absl::MutexLock lock(&mu_);
      if (!stale_) stale_ = actors_.Running();
      before = *stale_;
    }
    absl::StatusOr<v1::RegisterNodeReply> reply = head_.RegisterNode(req, timeout);
    if (!reply.ok()) {
      spdlog::warn("cannot register with head {}: {}", options_.head_address, reply.status().message());
      if (absl::IsInvalidArgument(reply.status()) || absl::IsUnauthenticated(reply.status())) {
        spdlog::critical("the head refused this node; exiting");
        return {absl::ZeroDuration(), 2};
      }
      MaybeFence(clock_.Now());
      return {period};
    }
    if (reply->was_dead() && !before.empty()) {
      spdlog::warn("the head had declared this node dead; stopping the {} actor(s) from before",
                   before.size());
      actors_.Stop(before);
    }
    node_.set_node_id(reply->node_id());
    absl::MutexLock lock(&mu_);
    stale_.reset();
    node_id_ = reply->node_id();
    registered_ = true;
    if (reply->heartbeat_period_ms() > 0) period_ = absl::Milliseconds(reply->heartbeat_period_ms());
    death_after_ = period_ * std::max(0, reply->heartbeat_misses());
    Reached(now);
    // Operators and the deployment test read what the node offers from this line.
    absl::StatusOr<ResourceSet> offered =
        ResourceSet::FromMap({node_.resources_total().begin(), node_.resources_total().end()});
    std::map<std::string, std::string> labels(node_.labels().begin(), node_.labels().end());
    spdlog::info("registered with head {} as {}: {} labels {{{}}}", options_.head_address, node_id_,
                 offered.ok() ? offered->ToString() : "?",
                 absl::StrJoin(labels, ",", absl::PairFormatter("=")));
    if (death_after_ > absl::ZeroDuration())
      spdlog::info(
          "the head declares a silent node dead after {}; cut off from it for {}, this node asks its peers "
          "and may fence its actors",
          absl::FormatDuration(death_after_), absl::FormatDuration(death_after_ / 2));
    return {period_};
  }

  v1::HeartbeatRequest req;
  {
    absl::MutexLock lock(&mu_);
    req.set_node_id(node_id_);
    req.set_peers_version(peers_version_);
  }
  absl::StatusOr<v1::HeartbeatReply> reply = head_.Heartbeat(req, timeout);
  if (reply.ok() || absl::IsNotFound(reply.status())) {
    absl::MutexLock lock(&mu_);
    Reached(now);
    if (reply.ok() && reply->peers_changed()) {
      peers_.assign(reply->peer_addresses().begin(), reply->peer_addresses().end());
      peers_version_ = reply->peers_version();
      spdlog::debug("peers: {} (version {})", absl::StrJoin(peers_, ","), peers_version_);
    }
    if (absl::IsNotFound(reply.status())) {
      spdlog::warn("head does not know this node ({}); registering again", reply.status().message());
      registered_ = false;
      stale_ = actors_.Running();
      return {absl::ZeroDuration()};
    }
    return {period_};
  }
  spdlog::warn("heartbeat to {} failed: {}", options_.head_address, reply.status().message());
  MaybeFence(clock_.Now());  // after the request's own timeout
  // Headless: try again sooner, so the fencing decision cannot slip past the threshold.
  return {std::min(period, timeout)};
}

void HeadLink::MaybeFence(absl::Time now) {
  std::vector<std::string> peers;
  absl::Duration silent, timeout;
  {
    absl::MutexLock lock(&mu_);
    if (death_after_ == absl::ZeroDuration()) return;
    if (fenced_) {
      // Actors started since (a start already on its way) must not serve either.
      if (int killed = actors_.Fence(fence_reason_); killed > 0)
        spdlog::critical("fenced {} more actor(s), started while fenced", killed);
      return;
    }
    silent = now - last_sent_;
    if (silent <= death_after_ * 2 / 5) return;
    peers = peers_;
    timeout = RequestTimeout();
  }
  if (peers.empty()) {  // a lone node: nobody to ask
    absl::MutexLock lock(&mu_);
    actors_.Lease(LeaseTerm());
    if (!cleared_)
      spdlog::warn("the head at {} has not answered for {}; no peers to ask, keeping this node's actors",
                   options_.head_address, absl::FormatDuration(silent));
    cleared_ = true;
    return;
  }
  const size_t asked = std::min<size_t>(peers.size(), 8);
  // The last try and the question to the peers at once: together within T/5.
  std::future<bool> last_try = std::async(std::launch::async, [this, timeout] { return LastTry(timeout); });
  std::string why = ReasonToFence(std::move(peers), timeout * 2);
  if (last_try.get()) return;
  absl::MutexLock lock(&mu_);
  if (why.empty()) {
    actors_.Lease(LeaseTerm());  // the head hears no one: it declares no one dead meanwhile
    if (!cleared_)
      spdlog::warn(
          "the head at {} has not answered for {}, and none of the {} peer(s) asked reaches it: keeping this "
          "node's actors (the head declares no node dead while it hears none)",
          options_.head_address, absl::FormatDuration(silent), asked);
    cleared_ = true;
    return;
  }
  fence_reason_ =
      absl::StrCat("node ", node_id_, " has not reached the head at ", options_.head_address, " for ",
                   absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(1))), " and ", why,
                   ": the head will declare the node dead after ", absl::FormatDuration(death_after_),
                   " and restart its actors elsewhere, so they are stopped here first");
  fenced_ = true;
  cleared_ = false;
  int killed = actors_.Fence(fence_reason_);
  spdlog::critical("fenced {} actor(s): {}", killed, fence_reason_);
}

bool HeadLink::LastTry(absl::Duration timeout) {
  v1::HeartbeatRequest req;
  {
    absl::MutexLock lock(&mu_);
    req.set_node_id(node_id_);
    req.set_peers_version(peers_version_);
  }
  head_.Reconnect();
  const absl::Time sent = clock_.Now();
  absl::StatusOr<v1::HeartbeatReply> reply = head_.Heartbeat(req, timeout);
  if (!reply.ok()) return false;
  spdlog::info("the head at {} answers on a fresh connection; not fencing", options_.head_address);
  absl::MutexLock lock(&mu_);
  Reached(sent);
  if (reply->peers_changed()) {
    peers_.assign(reply->peer_addresses().begin(), reply->peer_addresses().end());
    peers_version_ = reply->peers_version();
  }
  return true;
}

std::string HeadLink::ReasonToFence(std::vector<std::string> peers, absl::Duration timeout) {
  constexpr size_t kMaxAsked = 8;
  if (peers.size() > kMaxAsked) {
    static thread_local std::mt19937 rng(std::random_device{}());
    std::shuffle(peers.begin(), peers.end(), rng);
    peers.resize(kMaxAsked);
  }
  std::vector<std::future<absl::StatusOr<v1::HeadContactReply>>> answers;
  for (const std::string& peer : peers)
    answers.push_back(std::async(std::launch::async,
                                 [this, peer, timeout] { return peers_api_.HeadContact(peer, timeout); }));
  int answered = 0;
  std::string unreachable, reached;
  for (size_t i = 0; i < peers.size(); ++i) {
    absl::StatusOr<v1::HeadContactReply> r = answers[i].get();
    if (!r.ok()) {
      if (unreachable.empty()) unreachable = absl::StrCat(peers[i], ": ", r.status().message());
      continue;
    }
    ++answered;
    if (reached.empty() && r->reaches_head()) reached = absl::StrCat("peer ", peers[i], " reaches it");
  }
  if (!reached.empty()) return reached;
  // Cut off from every peer too: the head may be hearing all of them.
  if (answered == 0) return absl::StrCat("no peer can be asked (", unreachable, ")");
  return "";
}

}  // namespace skyrl::worker
