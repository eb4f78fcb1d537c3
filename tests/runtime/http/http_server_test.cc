// The dashboard's HTTP server (http_server.h), on loopback with real sockets.
#include "runtime/http/http_server.h"

#include <atomic>
#include <boost/asio.hpp>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/runtime/http/http_client.h"

namespace skyrl::http {
namespace {

using ::skyrl::testing::HttpFetch;
using ::testing::HasSubstr;

TEST(FormTest, DecodesPercentEscapesAndPlusAndKeepsMalformedOnes) {
  EXPECT_EQ(PercentDecode("a%20b+c%2Fd"), "a b c/d");
  EXPECT_EQ(PercentDecode("100%"), "100%");
  EXPECT_EQ(PercentDecode("%zz%4"), "%zz%4");
  std::map<std::string, std::string> form = ParseForm("token=ab%3D%3Dc&empty=&flag&x=1");
  EXPECT_EQ(form["token"], "ab==c");
  EXPECT_EQ(form["empty"], "");
  EXPECT_EQ(form.count("flag"), 1u);
  EXPECT_EQ(form["x"], "1");
}

TEST(HttpServerTest, HandsTheHandlerTheRequestAndSendsItsResponse) {
  Request seen;
  auto server = HttpServer::Start("127.0.0.1", 0, [&](const Request& r) {
    seen = r;
    Response out = Response::Json(201, "{\"ok\":true}");
    out.headers.emplace_back("Set-Cookie", "a=b; HttpOnly");
    return out;
  });
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  auto reply =
      HttpFetch((*server)->port(), "POST", "/api/x%20y?tail=12&name=a+b",
                {{"Cookie", "skyrl_session=s1; other=2"}, {"Authorization", "Bearer t"}}, "token=abc");
  EXPECT_EQ(reply.status, 201);
  EXPECT_EQ(reply.body, "{\"ok\":true}");
  EXPECT_EQ(reply.Header("content-type"), "application/json");
  EXPECT_EQ(reply.Header("set-cookie"), "a=b; HttpOnly");
  EXPECT_EQ(reply.Header("cache-control"), "no-store");
  EXPECT_EQ(seen.method, "POST");
  EXPECT_EQ(seen.path, "/api/x y");
  EXPECT_EQ(seen.Param("tail"), "12");
  EXPECT_EQ(seen.Param("name"), "a b");
  EXPECT_EQ(seen.Param("missing"), "");
  EXPECT_EQ(seen.Cookie("skyrl_session"), "s1");
  EXPECT_EQ(seen.Cookie("other"), "2");
  EXPECT_EQ(seen.Cookie("none"), "");
  EXPECT_EQ(seen.Header("authorization"), "Bearer t");
  EXPECT_EQ(seen.body, "token=abc");
  EXPECT_THAT(seen.peer, HasSubstr("127.0.0.1:"));
}

TEST(HttpServerTest, KeepsAConnectionAliveAcrossRequests) {
  std::atomic<int> calls{0};
  auto server = HttpServer::Start("127.0.0.1", 0, [&](const Request& r) {
    return Response::Text(200, r.path + " " + std::to_string(++calls));
  });
  ASSERT_TRUE(server.ok());
  namespace asio = boost::asio;
  namespace bhttp = boost::beast::http;
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>((*server)->port())});
  boost::beast::flat_buffer buffer;
  for (int i = 1; i <= 3; ++i) {
    bhttp::request<bhttp::string_body> req{bhttp::verb::get, "/p", 11};
    req.set(bhttp::field::host, "x");
    bhttp::write(socket, req);
    bhttp::response<bhttp::string_body> res;
    bhttp::read(socket, buffer, res);
    EXPECT_EQ(res.body(), "/p " + std::to_string(i));
    EXPECT_TRUE(res.keep_alive());
  }
}

TEST(HttpServerTest, RefusesBodiesOverTheLimitAndTurnsExceptionsInto500) {
  ServerOptions options;
  options.max_body_bytes = 16;
  auto server = HttpServer::Start(
      "127.0.0.1", 0,
      [](const Request& r) -> Response {
        if (r.path == "/throw") throw std::runtime_error("boom");
        return Response::Text(200, "ok");
      },
      options);
  ASSERT_TRUE(server.ok());
  EXPECT_EQ(HttpFetch((*server)->port(), "POST", "/", {}, std::string(17, 'x')).status, 413);
  EXPECT_EQ(HttpFetch((*server)->port(), "POST", "/", {}, std::string(16, 'x')).status, 200);
  auto thrown = HttpFetch((*server)->port(), "GET", "/throw");
  EXPECT_EQ(thrown.status, 500);
  EXPECT_THAT(thrown.body, HasSubstr("boom"));
}

TEST(HttpServerTest, AnswersBusyBeyondMaxConnections) {
  ServerOptions options;
  options.max_connections = 1;
  auto server = HttpServer::Start(
      "127.0.0.1", 0, [](const Request&) { return Response::Text(200, "ok"); }, options);
  ASSERT_TRUE(server.ok());
  // One idle connection holds the only slot.
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket idle(io);
  idle.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>((*server)->port())});
  auto busy = HttpFetch((*server)->port(), "GET", "/");
  for (int i = 0; i < 50 && busy.status == 200; ++i) busy = HttpFetch((*server)->port(), "GET", "/");
  EXPECT_EQ(busy.status, 503);
  idle.close();
  // Once it is gone, requests are served again.
  int status = 0;
  for (int i = 0; i < 200 && status != 200; ++i) {
    status = HttpFetch((*server)->port(), "GET", "/").status;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(status, 200);
}

TEST(HttpServerTest, StopEndsOpenConnectionsAndStopsListening) {
  auto server = HttpServer::Start("127.0.0.1", 0, [&](const Request&) { return Response::Text(200, "ok"); });
  ASSERT_TRUE(server.ok());
  const int port = (*server)->port();
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket idle(io);  // a keep-alive client that never sends
  idle.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  (*server)->Stop();  // must not wait for the idle client
  EXPECT_EQ(HttpFetch(port, "GET", "/").status, 0);
  char byte;
  boost::system::error_code ec;
  idle.read_some(boost::asio::buffer(&byte, 1), ec);
  EXPECT_TRUE(ec) << "the server ended the idle connection";
}

TEST(HttpServerTest, SaysWhyItCannotListen) {
  auto first = HttpServer::Start("127.0.0.1", 0, [](const Request&) { return Response::Text(200, ""); });
  ASSERT_TRUE(first.ok());
  auto taken = HttpServer::Start("127.0.0.1", (*first)->port(),
                                 [](const Request&) { return Response::Text(200, ""); });
  EXPECT_TRUE(absl::IsUnavailable(taken.status())) << taken.status();
  EXPECT_TRUE(absl::IsInvalidArgument(HttpServer::Start("not-an-ip", 0, nullptr).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(HttpServer::Start("127.0.0.1", 70000, nullptr).status()));
}

}  // namespace
}  // namespace skyrl::http
