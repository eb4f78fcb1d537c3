#include "runtime/worker/head_link.h"

#include <algorithm>
#include <map>
#include <future>
#include <system_error>

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

v1::HeadContactReply HeadLink::Contact(const std::string& asker) {
  v1::HeartbeatRequest req;
  absl::Duration timeout;
  bool registered;
  {
    absl::MutexLock lock(&mu_);
    registered = registered_;
    req = HeartbeatLocked();
    req.clear_period_ms();  // see HeartbeatLocked
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
      AdoptKeepLocked(*reply);
    }
  }
  absl::MutexLock lock(&mu_);
  v1::HeadContactReply r;
  r.set_since_head_contact_ms(last_answer_ ? absl::ToInt64Milliseconds(clock_.Now() - *last_answer_) : -1);
  r.set_fenced(fenced_);
  r.set_reaches_head(reaches);
  const bool knows = !asker.empty() && std::any_of(peers_.begin(), peers_.end(),
                                                   [&](const Peer& p) { return p.node_id == asker; });
  r.set_knows_asker(knows);
  // Checked against the list under the same lock a heartbeat takes it: a support is given
  // only while the list has the asker, and so reported by every heartbeat that says the
  // list has moved past it.
  if (knows && !reaches) supports_[asker] = clock_.Now();
  return r;
}

v1::HeartbeatRequest HeadLink::HeartbeatLocked() {
  v1::HeartbeatRequest req;
  req.set_node_id(node_id_);
  req.set_peers_version(peers_version_);
  req.set_keep_ms(absl::ToInt64Milliseconds(keep_));
  // Said only by this link's own rounds, which alone adopt a period from the reply, one at a
  // time: a peer's question (Contact) sent before an adoption and answered after must not
  // let the head count on a shorter period than the one adopted meanwhile.
  req.set_period_ms(absl::ToInt64Milliseconds(period_));
  const absl::Time now = clock_.Now();
  const absl::Duration keep = std::max(death_after_, absl::Seconds(1));
  absl::erase_if(supports_, [&](const auto& s) { return now - s.second > keep; });
  for (const auto& [peer, when] : supports_) {
    v1::PeerSupport* s = req.add_supports();
    s->set_node_id(peer);
    s->set_since_ms(std::max<int64_t>(0, absl::ToInt64Milliseconds(now - when)));
  }
  for (const v1::ActorStart& s : stopped_) *req.add_stopped() = s;
  for (const v1::ProcessCheck& g : gone_) *req.add_gone() = g;
  return req;
}

void HeadLink::CheckAsked(const v1::HeartbeatReply& reply) {
  if (!options_.process_gone) return;
  // Reported, and no longer asked: the head has taken note. Checked afresh each time it asks.
  std::vector<v1::ProcessCheck> gone;
  for (const v1::ProcessCheck& c : reply.check()) {
    if (c.pid() <= 0 || c.start_ticks() <= 0 || c.node_id().size() > 64) continue;
    if (options_.process_gone(c.pid(), c.start_ticks())) gone.push_back(c);
  }
  for (const v1::ProcessCheck& g : gone)
    spdlog::info("node {}: its worker process (pid {}) is gone from this machine; telling the head",
                 g.node_id(), g.pid());
  absl::MutexLock lock(&mu_);
  gone_ = std::move(gone);
}

namespace {
bool SameStart(const v1::ActorStart& a, const v1::ActorStart& b) {
  return a.actor_id() == b.actor_id() && a.incarnation() == b.incarnation();
}
}  // namespace

void HeadLink::StopAsked(const v1::HeartbeatReply& reply) {
  std::vector<v1::ActorStart> asked;
  {
    absl::MutexLock lock(&mu_);
    // Reported, and no longer asked: the head has taken note.
    std::erase_if(stopped_, [&](const v1::ActorStart& s) {
      return std::none_of(reply.stop().begin(), reply.stop().end(),
                          [&](const v1::ActorStart& a) { return SameStart(a, s); });
    });
    for (const v1::ActorStart& a : reply.stop())
      if (std::none_of(stopped_.begin(), stopped_.end(),
                       [&](const v1::ActorStart& s) { return SameStart(a, s); }))
        asked.push_back(a);
  }
  for (const v1::ActorStart& a : asked) {
    absl::StatusOr<ActorId> id = ActorId::Parse(a.actor_id());
    if (!id.ok() || a.incarnation() <= 0) {
      spdlog::warn("the head asked to stop start {} of actor '{}': not an actor id or start; ignored",
                   a.incarnation(), a.actor_id().substr(0, 64));
      continue;
    }
    // The head could not reach this worker to kill it (a one-way partition, say).
    if (!actors_.StopStart(*id, a.incarnation())) {
      spdlog::warn("actor {}: start {} still runs after the head asked to stop it; trying again",
                   a.actor_id(), a.incarnation());
      continue;
    }
    spdlog::info("actor {}: start {} stopped, as the head asked in a heartbeat reply", a.actor_id(),
                 a.incarnation());
    absl::MutexLock lock(&mu_);
    stopped_.push_back(a);
  }
}

void HeadLink::AdoptPeersLocked(const v1::HeartbeatReply& reply) {
  if (!reply.peers_changed()) return;
  peers_.clear();
  for (int i = 0; i < reply.peer_addresses_size(); ++i)
    peers_.push_back({i < reply.peer_node_ids_size() ? reply.peer_node_ids(i) : "", reply.peer_addresses(i)});
  peers_version_ = reply.peers_version();
  spdlog::debug("peers: {} (version {})",
                absl::StrJoin(peers_, ",", [](std::string* out, const Peer& p) { out->append(p.address); }),
                peers_version_);
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
      req.set_peers_version(peers_version_);  // kept until the reply comes, which may be lost
      // The limit it applies until the reply brings the head's (the head records the larger).
      req.mutable_node()->set_headless_keep_ms(absl::ToInt64Milliseconds(keep_));
    }
    absl::StatusOr<v1::RegisterNodeReply> reply = head_.RegisterNode(req, timeout);
    if (!reply.ok()) {
      spdlog::warn("cannot register with head {}: {}", options_.head_address, reply.status().message());
      if (absl::IsInvalidArgument(reply.status()) || absl::IsUnauthenticated(reply.status())) {
        spdlog::critical("the head refused this node; exiting");
        return {absl::ZeroDuration(), 2};
      }
      MaybeFence(clock_.Now());
      return {std::min(period, timeout)};
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
    // A list from before is stale (the head may have declared this node dead since): the
    // next heartbeat brings one, and says (version 0) it follows this registration.
    peers_.clear();
    peers_version_ = 0;
    if (reply->heartbeat_period_ms() > 0) period_ = absl::Milliseconds(reply->heartbeat_period_ms());
    misses_ = std::max(0, reply->heartbeat_misses());
    death_after_ = period_ * misses_;
    keep_ = absl::ZeroDuration();
    AdoptKeepLocked(reply->headless_keep_ms());
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
    req = HeartbeatLocked();
  }
  absl::StatusOr<v1::HeartbeatReply> reply = head_.Heartbeat(req, timeout);
  if (reply.ok()) {
    {
      absl::MutexLock lock(&mu_);
      Reached(now);
      AdoptPeersLocked(*reply);
      AdoptKeepLocked(*reply);
      AdoptPeriodLocked(*reply);
    }
    StopAsked(*reply);
    CheckAsked(*reply);
    absl::MutexLock lock(&mu_);
    return {period_};
  }
  if (absl::IsNotFound(reply.status())) {
    // Not a renewal: the head may have declared this node dead and be waiting for its peers
    // (or its retry window) before restarting its actors.
    absl::MutexLock lock(&mu_);
    spdlog::warn("head does not know this node ({}); registering again", reply.status().message());
    registered_ = false;
    stale_ = actors_.Running();
    return {absl::ZeroDuration()};
  }
  spdlog::warn("heartbeat to {} failed: {}", options_.head_address, reply.status().message());
  MaybeFence(clock_.Now());  // after the request's own timeout
  // Headless: try again sooner, so the fencing decision cannot slip past the threshold.
  return {std::min(period, timeout)};
}

void HeadLink::MaybeFence(absl::Time now) {
  std::vector<Peer> peers;
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
  bool has_list;
  {
    absl::MutexLock lock(&mu_);
    has_list = peers_version_ != 0;
  }
  if (!has_list) {  // registered, but no heartbeat brought a list yet: it cannot count
    absl::MutexLock lock(&mu_);
    FenceLocked(
        absl::StrCat("node ", node_id_, " has not reached the head at ", options_.head_address, " for ",
                     absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(1))),
                     " and holds no peer list yet to ask: the head may restart its actors elsewhere"));
    return;
  }
  // Supports given in this round are T old no earlier than T after it began; a renewal in it
  // runs 0.9 T from then, so it began within the keep limit.
  const absl::Time began = clock_.Now();
  // Kept on the peers' word (or alone) no longer than the head allows: past the keep limit
  // the lease is renewed no more, so the actors stop by themselves within 0.9 T, before the
  // head restarts them elsewhere (RegisterNodeReply.headless_keep_ms), unless the head
  // answers first. A peer that reaches the head still fences them at once (below).
  const bool renew = MayRenew(began);
  if (peers.empty()) {  // a lone node: nobody to ask
    absl::MutexLock lock(&mu_);
    if (renew) actors_.Lease(KeepTermLocked(began));
    if (!cleared_)
      spdlog::warn("the head at {} has not answered for {}; no peers to ask, keeping this node's actors",
                   options_.head_address, absl::FormatDuration(silent));
    cleared_ = true;
    return;
  }
  // The last try and the question to the peers at once: together within T/5.
  std::future<bool> last_try;
  try {
    last_try = std::async(std::launch::async, [this, timeout] { return LastTry(timeout); });
  } catch (const std::system_error&) {  // no thread for it: tried after the question instead
  }
  std::string why = ReasonToFence(peers, timeout * 2);
  if (last_try.valid() ? last_try.get() : LastTry(timeout)) return;
  absl::MutexLock lock(&mu_);
  if (why.empty()) {
    if (renew) actors_.Lease(KeepTermLocked(began));
    if (!cleared_)
      spdlog::warn(
          "the head at {} has not answered for {}, and a majority of the {} nodes on the peer list (this one "
          "included) cannot reach it either and count this node alive: keeping this node's actors (the head "
          "restarts none of them without that majority)",
          options_.head_address, absl::FormatDuration(silent), peers.size() + 1);
    cleared_ = true;
    return;
  }
  FenceLocked(absl::StrCat("node ", node_id_, " has not reached the head at ", options_.head_address, " for ",
                           absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(1))), " and ", why,
                           ": the head will declare the node dead after ", absl::FormatDuration(death_after_),
                           " and restart its actors elsewhere, so they are stopped here first"));
}

void HeadLink::FenceLocked(std::string reason) {
  fence_reason_ = std::move(reason);
  fenced_ = true;
  cleared_ = false;
  int killed = actors_.Fence(fence_reason_);
  spdlog::critical("fenced {} actor(s): {}", killed, fence_reason_);
}

absl::Duration HeadLink::KeepTermLocked(absl::Time began) const {
  // 0.9 T from the round's start (within the keep limit), whatever the question took.
  return std::clamp(began + LeaseTerm() - clock_.Now(), absl::ZeroDuration(), LeaseTerm());
}

void HeadLink::AdoptKeepLocked(int64_t keep_ms) {
  if (death_after_ > absl::ZeroDuration()) keep_ = absl::Milliseconds(std::max<int64_t>(0, keep_ms));
}

void HeadLink::AdoptKeepLocked(const v1::HeartbeatReply& reply) {
  if (reply.headless_keep_ms() > 0) AdoptKeepLocked(reply.headless_keep_ms());
}

void HeadLink::AdoptPeriodLocked(const v1::HeartbeatReply& reply) {
  const absl::Duration asked = absl::Milliseconds(reply.heartbeat_period_ms());
  if (reply.heartbeat_period_ms() <= 0 || asked == period_) return;
  spdlog::info("heartbeat period now {} (was {}), as the head asks", absl::FormatDuration(asked),
               absl::FormatDuration(period_));
  period_ = asked;
  death_after_ = period_ * misses_;
}

bool HeadLink::MayRenew(absl::Time began) {
  absl::MutexLock lock(&mu_);
  if (keep_ == absl::ZeroDuration() || began - last_sent_ < keep_) {
    past_keep_ = false;
    return true;
  }
  if (!past_keep_)
    spdlog::critical(
        "the head at {} has not answered for {}, past the {} its peers' word may keep this node's actors "
        "(--headless-keep-ms): their lease is renewed no more, so they stop within {} unless the head "
        "answers, before it restarts them elsewhere",
        options_.head_address, absl::FormatDuration(absl::Trunc(began - last_sent_, absl::Milliseconds(1))),
        absl::FormatDuration(keep_), absl::FormatDuration(LeaseTerm()));
  past_keep_ = true;
  return false;
}

bool HeadLink::LastTry(absl::Duration timeout) {
  v1::HeartbeatRequest req;
  {
    absl::MutexLock lock(&mu_);
    req = HeartbeatLocked();
  }
  head_.Reconnect();
  const absl::Time sent = clock_.Now();
  absl::StatusOr<v1::HeartbeatReply> reply = head_.Heartbeat(req, timeout);
  if (!reply.ok()) return false;
  spdlog::info("the head at {} answers on a fresh connection; not fencing", options_.head_address);
  absl::MutexLock lock(&mu_);
  Reached(sent);
  AdoptPeersLocked(*reply);
  AdoptKeepLocked(*reply);
  AdoptPeriodLocked(*reply);
  return true;
}

std::string HeadLink::ReasonToFence(const std::vector<Peer>& peers, absl::Duration timeout) {
  std::string me;
  {
    absl::MutexLock lock(&mu_);
    me = node_id_;
  }
  const size_t nodes = peers.size() + 1;
  // At most 64 questions at once (one wave for the clusters this runs), and no more once a
  // peer reaches the head.
  constexpr size_t kAtOnce = 64;
  absl::Mutex mu;
  size_t next = 0, support = 1;  // this node supports itself
  std::string unreachable, reached;
  auto decided = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return !reached.empty(); };
  auto ask = [&] {
    while (true) {
      size_t i;
      {
        absl::MutexLock lock(&mu);
        if (decided() || next >= peers.size()) return;
        i = next++;
      }
      absl::StatusOr<v1::HeadContactReply> r = peers_api_.HeadContact(peers[i].address, me, timeout);
      absl::MutexLock lock(&mu);
      if (!r.ok()) {
        if (unreachable.empty()) unreachable = absl::StrCat(peers[i].address, ": ", r.status().message());
      } else if (r->reaches_head()) {
        if (reached.empty()) reached = absl::StrCat("peer ", peers[i].address, " reaches it");
      } else if (r->knows_asker()) {
        ++support;
      }
    }
  };
  try {
    std::vector<std::future<void>> askers;
    for (size_t t = 0; t < std::min(kAtOnce, peers.size()); ++t)
      askers.push_back(std::async(std::launch::async, ask));
    for (auto& f : askers) f.get();
  } catch (const std::system_error& e) {  // no thread to ask with: as if no peer answered
    absl::MutexLock lock(&mu);
    if (reached.empty() && support <= nodes / 2)
      return absl::StrCat("its peers cannot be asked (", e.what(), ")");
  }
  absl::MutexLock lock(&mu);
  if (!reached.empty()) return reached;
  // More than half: the head cannot gather the half it needs to restart this node's actors.
  if (support > nodes / 2) return "";
  return absl::StrCat("only ", support, " of the ", nodes,
                      " nodes on the peer list (this one included) are cut off with it and count it alive",
                      unreachable.empty() ? "" : absl::StrCat(" (", unreachable, ")"),
                      ", not more than half: the head may hear the rest");
}

}  // namespace skyrl::worker
