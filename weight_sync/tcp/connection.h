// A stream socket (TCP, or a Unix-domain socket between ranks on one host) on its own
// io_context, with blocking calls that each have a deadline; Abort() from any thread makes the
// current and every later call fail at once. One thread drives a Connection; Abort is the only
// method safe to call from others.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <utility>  // before Boost 1.74's asio, whose awaitable.hpp needs std::exchange in C++20

#include <boost/asio.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace skyrl::weight_sync::tcp_internal {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using local = asio::local::stream_protocol;
// Either of the two: the socket type of every Connection.
using stream = asio::generic::stream_protocol;
using error_code = boost::system::error_code;

// Completion condition for whole-buffer reads and writes. asio's transfer_all caps every
// system call at 64 KiB (default_max_transfer_size), which on loopback means a wakeup and a
// system call per 64 KiB; this lets one readv/writev take as much as the kernel will.
inline std::size_t WholeBuffers(const error_code& ec, std::size_t) { return ec ? 0 : std::size_t{1} << 30; }

class Connection {
 public:
  Connection() : socket_(io_) {}
  stream::socket& socket() { return socket_; }

  // Runs one async operation started by `start(handler)` until it completes or `timeout`
  // passes (then the socket is closed and timed_out returned).
  template <typename Start>
  error_code Run(Start&& start, absl::Duration timeout) {
    if (aborted_.load()) return asio::error::operation_aborted;
    std::optional<error_code> result;
    start([&result](const error_code& ec, auto&&...) { result = ec; });
    io_.restart();
    // Clamped: an infinite timeout would overflow the clock's arithmetic.
    io_.run_for(std::chrono::nanoseconds(absl::ToInt64Nanoseconds(std::min(timeout, absl::Hours(24 * 365)))));
    if (!result) {
      error_code ignored;
      socket_.close(ignored);
      io_.restart();
      io_.run();  // the cancelled operation's handler
      return asio::error::timed_out;
    }
    if (aborted_.load() && !*result) return asio::error::operation_aborted;
    return *result;
  }

  // A tcp::endpoint or a local (Unix-domain) one; the socket takes the endpoint's protocol.
  error_code Connect(const stream::endpoint& ep, absl::Duration timeout) {
    return Run([&](auto h) { socket_.async_connect(ep, h); }, timeout);
  }
  template <typename Buffers>
  error_code Write(const Buffers& b, absl::Duration timeout) {
    return Run([&](auto h) { asio::async_write(socket_, b, WholeBuffers, h); }, timeout);
  }
  template <typename Buffers>
  error_code Read(const Buffers& b, absl::Duration timeout) {
    return Run([&](auto h) { asio::async_read(socket_, b, WholeBuffers, h); }, timeout);
  }

  // Thread-safe: closes the socket on the connection's own thread (or at its next call).
  void Abort() {
    aborted_.store(true);
    asio::post(io_, [this] {
      error_code ignored;
      socket_.close(ignored);
    });
  }
  bool aborted() const { return aborted_.load(); }

 private:
  asio::io_context io_;
  stream::socket socket_;
  std::atomic<bool> aborted_{false};
};

}  // namespace skyrl::weight_sync::tcp_internal
