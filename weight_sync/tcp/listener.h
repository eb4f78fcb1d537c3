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
#include <sys/un.h>

#include <atomic>
#include <cstdint>
#include <algorithm>
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

// Longest a Unix-domain abstract name may be: sun_path less the leading NUL.
inline constexpr size_t kMaxLocalName = sizeof(sockaddr_un::sun_path) - 1;

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
    if (same_host && !HostIdentity().empty()) OpenLocal();
    return ArmAll();
  }

  int port() const { return tcp_.local_endpoint().port(); }
  // The abstract name senders on this host dial (without its leading NUL), or empty.
  const std::string& local_name() const { return local_name_; }

  // Takes the next accepted connection, waiting at most `timeout`; returns timed_out then,
  // operation_aborted as soon as `stop` is set (and Wake() called), or the error an accept
  // failed with. Connections accepted while no one waited (a sender of the next version that
  // connected early) stay queued for later calls, also when `stop` ends this one.
  error_code Accept(std::unique_ptr<Connection>& out, absl::Duration timeout, const std::atomic<bool>& stop) {
    const auto deadline = std::chrono::steady_clock::now() + ClampedNanos(timeout);
    for (;;) {
      if (stop.load()) return asio::error::operation_aborted;
      if (!ready_.empty()) break;
      if (error_code ec = ArmAll(); ec) return ec;
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
  // waiting, and forgets accept errors nobody waited for: they must not fail the next sync
  // (its Accept re-arms the acceptor and sees a lasting error itself).
  void Poll() {
    if (io_.stopped()) io_.restart();
    io_.poll();
    std::erase_if(ready_, [](const Ready& r) { return static_cast<bool>(r.ec); });
  }

  // Thread-safe: makes a blocked Accept look at its `stop` flag.
  void Wake() {
    asio::post(io_, [] {});
  }

 private:
  struct Ready {
    error_code ec;
    std::unique_ptr<Connection> conn;
  };
  // One acceptor and the connection its outstanding accept fills (null: not armed).
  template <typename Acceptor>
  struct Slot {
    Acceptor* acceptor = nullptr;
    std::unique_ptr<Connection> pending;
  };

  static std::chrono::nanoseconds ClampedNanos(absl::Duration d) {
    return std::chrono::nanoseconds(absl::ToInt64Nanoseconds(std::min(d, absl::Hours(24 * 365))));
  }

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
    local_slot_.acceptor = &*local_;
  }

  // Keeps one accept outstanding on each open acceptor. A completion queues its connection
  // (or its error) and leaves the slot unarmed; the next Accept arms it again, so a lasting
  // accept error (out of descriptors) costs one failed Accept, not a loop.
  error_code ArmAll() {
    tcp_slot_.acceptor = &tcp_;
    if (error_code ec = Arm(tcp_slot_); ec) return ec;
    if (local_) return Arm(local_slot_);
    return {};
  }
  template <typename Acceptor>
  error_code Arm(Slot<Acceptor>& slot) {
    if (slot.pending != nullptr || slot.acceptor == nullptr || !slot.acceptor->is_open()) return {};
    try {
      slot.pending = std::make_unique<Connection>();  // its io_context needs descriptors
    } catch (const boost::system::system_error& e) {
      return e.code();
    }
    slot.acceptor->async_accept(slot.pending->socket(), [this, &slot](const error_code& ec) {
      if (ec == asio::error::operation_aborted) return;  // closing: slot.pending dies with us
      ready_.push_back({ec, ec ? nullptr : std::move(slot.pending)});
      slot.pending.reset();
    });
    return {};
  }

  asio::io_context io_;
  tcp::acceptor tcp_;
  std::optional<local::acceptor> local_;
  std::string local_name_;
  Slot<tcp::acceptor> tcp_slot_;
  Slot<local::acceptor> local_slot_;
  std::deque<Ready> ready_;
};

}  // namespace skyrl::weight_sync::tcp_internal
