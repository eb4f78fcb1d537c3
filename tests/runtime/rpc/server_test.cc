// The daemons' shared server set-up: one daemon per port, and the TLS flags.
#include "runtime/rpc/server.h"

#include <gtest/gtest.h>

#include "CLI/CLI.hpp"
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
