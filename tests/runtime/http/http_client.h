// One HTTP/1.1 request on loopback and its whole response, for tests of HTTP servers
// (Boost.Beast, header-only). Sends "Connection: close" unless the caller keeps the socket.
#pragma once

#include <map>
#include <string>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/ascii.h"

namespace skyrl::testing {

struct HttpReply {
  int status = 0;                              // 0: no answer
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

// `headers` as given (e.g. {"Cookie", "a=b"}); a body is sent with `content_type`.
inline HttpReply HttpFetch(int port, const std::string& method, const std::string& path,
                           const std::map<std::string, std::string>& headers = {},
                           const std::string& body = "",
                           const std::string& content_type = "application/x-www-form-urlencoded") {
  namespace asio = boost::asio;
  namespace bhttp = boost::beast::http;
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  boost::system::error_code ec;
  socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)}, ec);
  if (ec) return {};
  bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), path, 11};
  req.set(bhttp::field::host, "127.0.0.1");
  req.set(bhttp::field::connection, "close");
  for (const auto& [name, value] : headers) req.set(name, value);
  if (!body.empty()) {
    req.set(bhttp::field::content_type, content_type);
    req.body() = body;
  }
  req.prepare_payload();
  bhttp::write(socket, req, ec);
  if (ec) return {};
  boost::beast::flat_buffer buffer;
  bhttp::response<bhttp::string_body> res;
  bhttp::read(socket, buffer, res, ec);
  if (ec) return {};
  HttpReply out;
  out.status = res.result_int();
  for (const auto& f : res)
    out.headers[absl::AsciiStrToLower(std::string(f.name_string()))] = std::string(f.value());
  out.body = res.body();
  return out;
}

}  // namespace skyrl::testing
