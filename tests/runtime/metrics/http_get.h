// GET over HTTP/1.0 on loopback, for the tests of /metrics endpoints (Boost.Asio, header-only).
#pragma once

#include <string>

#include <boost/asio.hpp>

namespace skyrl::testing {

// The whole response (status line, headers, body), or "" when nothing answers.
inline std::string HttpGet(int port, const std::string& path) {
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  boost::system::error_code ec;
  socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)}, ec);
  if (ec) return "";
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  asio::write(socket, asio::buffer(request), ec);
  if (ec) return "";
  std::string response;
  asio::read(socket, asio::dynamic_buffer(response), ec);  // until the server closes
  return response;
}

}  // namespace skyrl::testing
