#include "runtime/head/node_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/rpc/status.h"

namespace skyrl::head {
namespace {
// A worker supports at most its peers; more than any cluster has is a bad request.
constexpr int kMaxSupports = 4096;
// Stops are asked one per restart waiting on the node; more than that is a bad request.
constexpr int kMaxStopped = 65536;
// A day: longer than any period a head asks for (skyrl-head --heartbeat-period-ms is at most
// 10 minutes, stretched by the cluster's size).
constexpr int64_t kMaxPeriodMs = 86'400'000;
}  // namespace

grpc::ServerUnaryReactor* NodeServiceImpl::RegisterNode(grpc::CallbackServerContext* ctx,
                                                        const v1::RegisterNodeRequest* req,
                                                        v1::RegisterNodeReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return rpc::FinishNow(ctx, s);
  bool was_dead = false;
  absl::Duration period;
  absl::StatusOr<NodeId> id = nodes_.Register(req->node(), &was_dead, req->peers_version(), &period);
  if (!id.ok()) return rpc::FinishNow(ctx, rpc::ToGrpc(id.status()));
  reply->set_node_id(id->ToString());
  reply->set_was_dead(was_dead);
  reply->set_heartbeat_period_ms(absl::ToInt64Milliseconds(period));
  // Workers fence only against a head that will not declare nodes dead while it hears none,
  // and only when a period leaves them the time to (worker::HeadLink: 4 misses or more).
  if (nodes_.fencing()) {
    reply->set_heartbeat_misses(nodes_.options().heartbeat_misses);
    reply->set_headless_keep_ms(absl::ToInt64Milliseconds(nodes_.options().headless_keep));
  }
  return rpc::FinishNow(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* NodeServiceImpl::Heartbeat(grpc::CallbackServerContext* ctx,
                                                     const v1::HeartbeatRequest* req,
                                                     v1::HeartbeatReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return rpc::FinishNow(ctx, s);
  absl::StatusOr<NodeId> id = NodeId::Parse(req->node_id());
  if (!id.ok()) return rpc::FinishNow(ctx, rpc::ToGrpc(id.status()));
  if (req->supports_size() > kMaxSupports)
    return rpc::FinishNow(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                            absl::StrCat("supports: more than ", kMaxSupports)));
  HeartbeatIn in{.node = *id, .peers_version = req->peers_version()};
  for (const v1::PeerSupport& s : req->supports()) {
    absl::StatusOr<NodeId> peer = NodeId::Parse(s.node_id());
    if (!peer.ok() || s.since_ms() < 0)
      return rpc::FinishNow(
          ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrCat("supports.node_id ", s.node_id().substr(0, 64), " / since_ms ",
                                         s.since_ms(), ": not a node id, or negative")));
    in.supports.push_back({*peer, absl::Milliseconds(s.since_ms())});
  }
  if (req->stopped_size() > kMaxStopped)
    return rpc::FinishNow(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                            absl::StrCat("stopped: more than ", kMaxStopped)));
  std::vector<ActorStart> stopped;
  for (const v1::ActorStart& s : req->stopped()) {
    if (!ActorId::Parse(s.actor_id()).ok() || s.incarnation() <= 0)
      return rpc::FinishNow(
          ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrCat("stopped.actor_id ", s.actor_id().substr(0, 64), " / incarnation ",
                                         s.incarnation(), ": not an actor id, or not above 0")));
    stopped.push_back({s.actor_id(), s.incarnation()});
  }
  if (req->gone_size() > kMaxSupports)
    return rpc::FinishNow(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                            absl::StrCat("gone: more than ", kMaxSupports)));
  for (const v1::ProcessCheck& g : req->gone()) {
    absl::StatusOr<NodeId> node = NodeId::Parse(g.node_id());
    if (!node.ok() || g.pid() <= 0 || g.start_ticks() <= 0)
      return rpc::FinishNow(
          ctx,
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                       absl::StrCat("gone.node_id ", g.node_id().substr(0, 64), " / pid ", g.pid(),
                                    " / start_ticks ", g.start_ticks(), ": not a node id, or not above 0")));
    in.gone.push_back({*node, g.pid(), g.start_ticks()});
  }
  if (req->keep_ms() < 0)
    return rpc::FinishNow(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                            absl::StrCat("keep_ms: ", req->keep_ms(), " is negative")));
  if (req->period_ms() < 0 || req->period_ms() > kMaxPeriodMs)
    return rpc::FinishNow(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                            absl::StrCat("period_ms: ", req->period_ms(),
                                                         " is not within [0, ", kMaxPeriodMs, "]")));
  // The limits its worker applies are recorded (and stored) before this reply, which
  // carries the head's own, goes out.
  in.period = absl::Milliseconds(req->period_ms());
  in.keep = absl::Milliseconds(req->keep_ms());
  absl::StatusOr<HeartbeatOut> out = nodes_.Heartbeat(in);
  if (!out.ok()) return rpc::FinishNow(ctx, rpc::ToGrpc(out.status()));
  reply->set_heartbeat_period_ms(absl::ToInt64Milliseconds(out->period));
  if (nodes_.fencing())
    reply->set_headless_keep_ms(absl::ToInt64Milliseconds(nodes_.options().headless_keep));
  for (const ProcessCheck& c : out->checks) {
    v1::ProcessCheck* check = reply->add_check();
    check->set_node_id(c.node.ToString());
    check->set_pid(c.pid);
    check->set_start_ticks(c.start_ticks);
  }
  // Stops are exchanged only with a node the table holds ALIVE (a dead one registers again).
  for (ActorStart& s : stops_.Exchange(*id, stopped)) {
    v1::ActorStart* stop = reply->add_stop();
    stop->set_actor_id(std::move(s.actor_id));
    stop->set_incarnation(s.incarnation);
  }
  PeerList& peers = out->peers;
  reply->set_peers_changed(peers.changed);
  reply->set_peers_version(peers.version);
  for (std::string& a : peers.addresses) reply->add_peer_addresses(std::move(a));
  for (std::string& n : peers.node_ids) reply->add_peer_node_ids(std::move(n));
  return rpc::FinishNow(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* NodeServiceImpl::UnregisterNode(grpc::CallbackServerContext* ctx,
                                                          const v1::UnregisterNodeRequest* req,
                                                          v1::UnregisterNodeReply*) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return rpc::FinishNow(ctx, s);
  absl::StatusOr<NodeId> id = NodeId::Parse(req->node_id());
  if (!id.ok()) return rpc::FinishNow(ctx, rpc::ToGrpc(id.status()));
  return rpc::FinishNow(ctx, rpc::ToGrpc(nodes_.Unregister(*id, req->reason())));
}

grpc::ServerUnaryReactor* NodeServiceImpl::ListNodes(grpc::CallbackServerContext* ctx,
                                                     const v1::ListNodesRequest*, v1::ListNodesReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return rpc::FinishNow(ctx, s);
  for (auto& n : nodes_.List()) *reply->add_nodes() = std::move(n);
  if (metrics_port_) reply->set_head_metrics_port(std::max(0, metrics_port_()));
  resources_.With([&](const scheduler::Cluster& cluster) {
    for (v1::NodeInfo& n : *reply->mutable_nodes()) {
      const scheduler::Pool* pool = n.state() == v1::NODE_ALIVE ? cluster.NodePool(n.node_id()) : nullptr;
      if (pool == nullptr) continue;
      for (const auto& [kind, amount] : pool->free().ToMap())
        (*n.mutable_resources_available())[kind] = amount;
    }
  });
  return rpc::FinishNow(ctx, grpc::Status::OK);
}

}  // namespace skyrl::head
