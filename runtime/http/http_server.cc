#include "runtime/http/http_server.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <exception>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace skyrl::http {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

// An idle keep-alive connection is closed after this long, freeing its thread.
constexpr int kIdleSeconds = 60;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string ReasonFor(int status) {
  return std::string(bhttp::obsolete_reason(static_cast<bhttp::status>(status)));
}

}  // namespace

std::string PercentDecode(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::map<std::string, std::string> ParseForm(const std::string& text) {
  std::map<std::string, std::string> out;
  for (absl::string_view pair : absl::StrSplit(text, '&', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    out.emplace(PercentDecode(kv.first), PercentDecode(kv.second));
  }
  return out;
}

std::string Request::Header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? "" : it->second;
}

std::string Request::Cookie(const std::string& name) const {
  for (absl::string_view part : absl::StrSplit(Header("cookie"), ';')) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    if (absl::StripAsciiWhitespace(kv.first) == name)
      return std::string(absl::StripAsciiWhitespace(kv.second));
  }
  return "";
}

std::string Request::Param(const std::string& name) const {
  std::map<std::string, std::string> params = ParseForm(query);
  auto it = params.find(name);
  return it == params.end() ? "" : it->second;
}

Response Response::Text(int status, std::string body) {
  return {status, "text/plain; charset=utf-8", std::move(body), {}};
}
Response Response::Json(int status, std::string body) {
  return {status, "application/json", std::move(body), {}};
}
Response Response::Html(int status, std::string body) {
  return {status, "text/html; charset=utf-8", std::move(body), {}};
}
Response Response::Redirect(const std::string& location) {
  return {303, "text/plain; charset=utf-8", "see " + location + "\n", {{"Location", location}}};
}

struct HttpServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& bind, int port,
                                                              Handler handler, ServerOptions options) {
  if (port < 0 || port > 65535)
    return absl::InvalidArgumentError(absl::StrCat("port: ", port, " is not 0..65535"));
  boost::system::error_code ec;
  const asio::ip::address address = asio::ip::make_address(bind, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("bind: \"", bind, "\" is not an IP address"));
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->impl_ = std::make_unique<Impl>();
  s->handler_ = std::move(handler);
  s->options_ = options;
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  tcp::acceptor& acceptor = s->impl_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return absl::UnavailableError(
        absl::StrCat("http: cannot listen on ", bind, ":", port, ": ", ec.message()));
  s->port_ = acceptor.local_endpoint().port();
  s->acceptor_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  return s;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (stopping_.exchange(true)) return;
  // shutdown() wakes the acceptor blocked in accept() and every connection blocked in a read.
  ::shutdown(impl_->acceptor.native_handle(), SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> done;
  {
    absl::MutexLock l(&mu_);
    for (auto& [fd, t] : connections_) ::shutdown(fd, SHUT_RDWR);
  }
  // Each connection thread moves itself to finished_ as it ends; wait for all of them.
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      done.swap(finished_);
      if (connections_.empty() && done.empty()) break;
    }
    for (std::thread& t : done) t.join();
    done.clear();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

namespace {

// Answers requests on one connection until it closes, idles out, or a response ends it.
void ServeConnection(tcp::socket& socket, const std::string& peer, const Handler& handler,
                     const ServerOptions& options, const std::atomic<bool>& stopping) {
  beast::flat_buffer buffer;
  for (;;) {
    bhttp::request_parser<bhttp::string_body> parser;
    parser.body_limit(options.max_body_bytes);
    boost::system::error_code ec;
    bhttp::read(socket, buffer, parser, ec);
    Response response;
    bool keep_alive = false;
    if (ec == bhttp::error::body_limit) {
      response = Response::Text(413, absl::StrCat("body larger than ", options.max_body_bytes, " bytes\n"));
    } else if (ec) {
      return;  // closed, idle too long, or not HTTP
    } else {
      const auto& msg = parser.get();
      keep_alive = msg.keep_alive();
      Request req;
      req.method = std::string(msg.method_string());
      const std::string target(msg.target());
      const size_t q = target.find('?');
      req.path = PercentDecode(target.substr(0, q));
      if (q != std::string::npos) req.query = target.substr(q + 1);
      for (const auto& field : msg)
        req.headers[absl::AsciiStrToLower(std::string(field.name_string()))] = std::string(field.value());
      req.body = msg.body();
      req.peer = peer;
      try {
        response = handler(req);
      } catch (const std::exception& e) {
        response = Response::Text(500, absl::StrCat("internal error: ", e.what(), "\n"));
      }
    }
    bhttp::response<bhttp::string_body> out{static_cast<bhttp::status>(response.status), 11};
    out.reason(ReasonFor(response.status));
    out.set(bhttp::field::content_type, response.content_type);
    out.set(bhttp::field::cache_control, "no-store");
    out.set("X-Content-Type-Options", "nosniff");
    for (const auto& [name, value] : response.headers) out.insert(name, value);
    out.keep_alive(keep_alive && !stopping);
    out.body() = std::move(response.body);
    out.prepare_payload();
    bhttp::write(socket, out, ec);
    if (ec || !out.keep_alive()) {
      socket.shutdown(tcp::socket::shutdown_send, ec);
      return;
    }
  }
}

}  // namespace

void HttpServer::AcceptLoop() {
  while (!stopping_) {
    tcp::socket socket(impl_->io);
    boost::system::error_code ec;
    impl_->acceptor.accept(socket, ec);
    std::vector<std::thread> done;
    {
      absl::MutexLock l(&mu_);
      done.swap(finished_);
    }
    for (std::thread& t : done) t.join();
    if (stopping_) break;
    if (ec) {  // out of descriptors, or an aborted connection: try again shortly
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    const timeval idle{kIdleSeconds, 0};
    ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof(idle));
    std::string peer;
    if (auto remote = socket.remote_endpoint(ec); !ec)
      peer = absl::StrCat(remote.address().to_string(), ":", remote.port());
    absl::MutexLock l(&mu_);
    if (static_cast<int>(connections_.size()) >= options_.max_connections) {
      bhttp::response<bhttp::string_body> busy{bhttp::status::service_unavailable, 11};
      busy.set(bhttp::field::content_type, "text/plain; charset=utf-8");
      busy.set(bhttp::field::connection, "close");
      busy.body() = "too many connections; try again\n";
      busy.prepare_payload();
      bhttp::write(socket, busy, ec);
      continue;
    }
    const int fd = socket.native_handle();
    connections_[fd] = std::thread([this, s = std::move(socket), peer]() mutable {
      const int fd = s.native_handle();
      ServeConnection(s, peer, handler_, options_, stopping_);
      absl::MutexLock l(&mu_);  // before the socket closes, so Stop never shuts a reused fd
      auto it = connections_.find(fd);
      finished_.push_back(std::move(it->second));
      connections_.erase(it);
      boost::system::error_code ignored;
      s.close(ignored);
    });
  }
}

}  // namespace skyrl::http
