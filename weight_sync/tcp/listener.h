// A receiver's listening side for the TCP transport: a TCP acceptor and, for senders on the
// same host, a Unix-domain stream acceptor in the abstract namespace. Both feed one queue of
// accepted connections, so a receive loop takes whichever sender connects next.
//
// Why a same-host path: on one machine, TCP over loopback spends more CPU per byte on segment
// processing (ACKs, skb handling, softirqs) than on the one copy a byte needs; a Unix stream
// socket takes the same spliced pages with none of that. Measured in docs/performance.md
// ("weight_sync"). Abstract Unix names live in a network namespace, so "same host" here means
// the same boot and the same network namespace (HostIdentity), which is what lets a sender
// reach the name: processes on one node, or containers of one Kubernetes pod.
//
// Threads: Accept and Poll are called by one thread (the receive loop); Wake is safe from any.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "weight_sync/tcp/connection.h"

namespace skyrl::weight_sync::tcp_internal {

// This process's host as seen by abstract Unix sockets: "<boot id>/<network namespace inode>";
// empty when either cannot be read (then no same-host path is offered or taken).
inline const std::string& HostIdentity() {
  static const std::string id = [] {
    std::string boot;
    std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
    struct stat st {};
    if (boot.empty() || stat("/proc/self/ns/net", &st) != 0) return std::string();
    return absl::StrCat(boot, "/", st.st_ino);
  }();
  return id;
}

class Listener {
 public:
  Listener() : tcp_(io_) {}
  ~Listener() {
    error_code ignored;
    tcp_.close(ignored);
    if (local_) local_->close(ignored);
    Poll();  // the cancelled accepts' handlers, while everything they touch is alive
  }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Listens on `addr` port 0 (any free port). With `same_host`, also on a fresh abstract Unix
  // name; failing that, the same-host path is just not offered (local_name() stays empty).
  error_code Open(const asio::ip::address& addr, bool same_host) {
    error_code ec;
    tcp::endpoint ep(addr, 0);
    tcp_.open(ep.protocol(), ec);
    if (!ec) tcp_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) tcp_.bind(ep, ec);
    if (!ec) tcp_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return ec;
    Arm(tcp_, tcp_pending_);
    if (same_host && !HostIdentity().empty()) OpenLocal();
    return {};
  }

  int port() const { return tcp_.local_endpoint().port(); }
  // The abstract name senders on this host dial (without its leading NUL), or empty.
  const std::string& local_name() const { return local_name_; }

  // Takes the next accepted connection, waiting at most `timeout`; returns timed_out then, or
  // operation_aborted once `stop` is set and Wake() called. Connections accepted while no one
  // waited (a sender of the next version that connected early) are kept for later calls.
  error_code Accept(std::unique_ptr<Connection>& out, absl::Duration timeout, const std::atomic<bool>& stop) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(absl::ToInt64Nanoseconds(timeout));
    while (ready_.empty()) {
      if (stop.load()) return asio::error::operation_aborted;
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return asio::error::timed_out;
      if (io_.stopped()) io_.restart();
      io_.run_one_for(deadline - now);
    }
    Ready r = std::move(ready_.front());
    ready_.pop_front();
    out = std::move(r.conn);
    return r.ec;
  }

  // Runs what is already due (accepts that completed, Wake()s from an earlier sync) without
  // waiting, so a stale wake-up cannot end the next sync's first Accept.
  void Poll() {
    if (io_.stopped()) io_.restart();
    io_.poll();
  }

  // Thread-safe: makes a blocked Accept look at its `stop` flag.
  void Wake() { asio::post(io_, [] {}); }

 private:
  struct Ready {
    error_code ec;
    std::unique_ptr<Connection> conn;
  };

  void OpenLocal() {
    std::random_device rd;
    const uint64_t nonce = (uint64_t{rd()} << 32) ^ rd();
    std::string name = absl::StrFormat("skyrl-weight-sync-%d-%016x", getpid(), nonce);
    local::endpoint ep(std::string(1, '\0') + name);  // leading NUL: the abstract namespace
    error_code ec;
    local_.emplace(io_);
    local_->open(ep.protocol(), ec);
    if (!ec) local_->bind(ep, ec);
    if (!ec) local_->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      local_.reset();
      return;
    }
    local_name_ = std::move(name);
    Arm(*local_, local_pending_);
  }

  // Keeps one accept outstanding on `acceptor`; each completion queues its connection (or the
  // error) and arms the next.
  template <typename Acceptor>
  void Arm(Acceptor& acceptor, std::unique_ptr<Connection>& pending) {
    pending = std::make_unique<Connection>();
    acceptor.async_accept(pending->socket(), [this, &acceptor, &pending](const error_code& ec) {
      ready_.push_back({ec, std::move(pending)});
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;  // shutting down
      Arm(acceptor, pending);
    });
  }

  asio::io_context io_;
  tcp::acceptor tcp_;
  std::optional<local::acceptor> local_;
  std::string local_name_;
  std::unique_ptr<Connection> tcp_pending_, local_pending_;
  std::deque<Ready> ready_;
};

}  // namespace skyrl::weight_sync::tcp_internal
