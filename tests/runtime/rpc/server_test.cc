// The daemons' shared server set-up: one daemon per port, and the TLS flags.
#include "runtime/rpc/server.h"

#include <gtest/gtest.h>

#include "CLI/CLI.hpp"
#include "runtime/rpc/channel.h"
#include "skyrl/kv.grpc.pb.h"

namespace skyrl::rpc {
namespace {

TEST(ServerTest, ASecondServerOnAPortInUseFailsNamingTheAddress) {
  // Every method unimplemented: a server needs a service, and a service serves one server.
  v1::KvService::Service service, other;
  absl::StatusOr<ListeningServer> first = StartServer("127.0.0.1", 0, {&service});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_GT(first->port, 0);
  absl::StatusOr<ListeningServer> second = StartServer("127.0.0.1", first->port, {&other});
  EXPECT_TRUE(absl::IsUnavailable(second.status())) << "SO_REUSEPORT must be off: " << second.status();
  EXPECT_NE(second.status().message().find(absl::StrCat("127.0.0.1:", first->port)), absl::string_view::npos)
      << second.status();
  first->server->Shutdown();
}

// Answers Get with OK for key "here" and NOT_FOUND otherwise; Put is left unimplemented.
class Kv : public v1::KvService::Service {
  grpc::Status Get(grpc::ServerContext*, const v1::KvGetRequest* req, v1::KvGetReply*) override {
    if (req->key() == "here") return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such key");
  }
};

uint64_t Count(const std::vector<LatencyStats::Series>& series, const std::string& method,
               const std::string& code) {
  for (const LatencyStats::Series& s : series) {
    if (s.name != method) continue;
    auto it = s.outcomes.find(code);
    return it == s.outcomes.end() ? 0 : it->second;
  }
  return 0;
}

TEST(ServerTest, StatsCountEveryAnsweredCallByMethodAndCode) {
  Kv service;
  LatencyStats stats(LatencyStats::RpcBounds());
  absl::StatusOr<ListeningServer> server = StartServer("127.0.0.1", 0, {&service}, &stats);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::KvService::NewStub(MakeChannel(absl::StrCat("127.0.0.1:", server->port)));
  for (const char* key : {"here", "here", "gone"}) {
    grpc::ClientContext ctx;
    v1::KvGetRequest req;
    req.set_key(key);
    v1::KvGetReply reply;
    stub->Get(&ctx, req, &reply);
  }
  {
    grpc::ClientContext ctx;
    v1::KvPutReply reply;
    EXPECT_EQ(stub->Put(&ctx, v1::KvPutRequest(), &reply).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  }
  server->server->Shutdown();

  const std::vector<LatencyStats::Series> series = stats.Snapshot();
  EXPECT_EQ(Count(series, "/skyrl.v1.KvService/Get", "OK"), 2u);
  EXPECT_EQ(Count(series, "/skyrl.v1.KvService/Get", "NOT_FOUND"), 1u);
  EXPECT_EQ(Count(series, "/skyrl.v1.KvService/Put", "UNIMPLEMENTED"), 1u);
  for (const LatencyStats::Series& s : series) {
    if (s.name != "/skyrl.v1.KvService/Get") continue;
    uint64_t in_buckets = 0;
    for (uint64_t n : s.buckets) in_buckets += n;
    EXPECT_EQ(in_buckets, 3u) << "every call lands in one latency bucket";
    EXPECT_GT(s.sum_s, 0);
  }
}

TEST(ServerTest, TlsFlagsAreParsedAndABadFileIsNamedByItsFlag) {
  CLI::App app;
  TlsFiles files;
  AddTlsFlags(app, files);
  const char* argv[] = {"daemon", "--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"};
  app.parse(5, const_cast<char**>(argv));
  EXPECT_EQ(files.cert, "/nonexistent/cert.pem");
  EXPECT_EQ(files.key, "/nonexistent/key.pem");
  EXPECT_TRUE(files.ca.empty());
  absl::Status s = ConfigureTls(files);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("--tls-cert"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace skyrl::rpc
