// A small HTTP/1.1 server (Boost.Beast) for pages and JSON served by a daemon: the head's
// dashboard. One handler answers every request; it runs on the connection's thread, so it must
// be thread-safe. Connections are kept alive; each has a thread of its own, at most
// `max_connections` at once (more are answered 503 and closed). Bodies over `max_body_bytes`
// are answered 413. Not for bulk data: bodies are strings in memory.
//
//   auto server = HttpServer::Start("127.0.0.1", 0, handler);   // port 0: a free one
//   ... (*server)->port() ...
//   server->reset();  // stops listening, ends open connections, joins their threads
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace skyrl::http {

struct Request {
  std::string method;                          // "GET", "POST", ...
  std::string path;                            // the target before '?', percent-decoded
  std::string query;                           // after '?', as sent
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string peer;  // "ip:port"

  // The header's value, "" when absent. `name` lower-case.
  std::string Header(const std::string& name) const;
  // The cookie's value from the Cookie header, "" when absent.
  std::string Cookie(const std::string& name) const;
  // A query parameter (percent-decoded), "" when absent.
  std::string Param(const std::string& name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra: Set-Cookie, Location, ...

  static Response Text(int status, std::string body);
  static Response Json(int status, std::string body);
  static Response Html(int status, std::string body);
  static Response Redirect(const std::string& location);  // 303 See Other
};

// application/x-www-form-urlencoded (a form's body, a query string) as name -> value.
std::map<std::string, std::string> ParseForm(const std::string& text);
// %XX and '+' decoded; malformed escapes are kept as they are.
std::string PercentDecode(const std::string& s);

using Handler = std::function<Response(const Request&)>;

struct ServerOptions {
  int max_connections = 64;
  size_t max_body_bytes = 64 * 1024;
};

class HttpServer {
 public:
  // Listens on bind:port (port 0: a free one). InvalidArgument for a bad port or address,
  // Unavailable naming the address when it cannot listen.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& bind, int port, Handler handler,
                                                           ServerOptions options = {});
  ~HttpServer();  // Stop()

  // Stops accepting, ends open connections and joins every thread. Idempotent.
  void Stop();
  int port() const { return port_; }

 private:
  struct Impl;
  HttpServer() = default;
  void AcceptLoop();

  std::unique_ptr<Impl> impl_;
  Handler handler_;
  ServerOptions options_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  absl::Mutex mu_;
  std::map<int, std::thread> connections_ ABSL_GUARDED_BY(mu_);  // by socket fd
  std::vector<std::thread> finished_ ABSL_GUARDED_BY(mu_);       // to join
};

}  // namespace skyrl::http
