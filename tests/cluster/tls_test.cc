// TLS across the cluster: a head, a worker and an actor host serving mutual TLS with a test
// CA made by openssl; clients with the CA and a certificate work, plaintext clients and
// clients without a certificate are refused. Its own binary: credentials are read from the
// environment once per process.
#include <cstdlib>

#include "tests/cluster/cluster_fixture.h"

namespace skyrl::testing {
namespace {

class TlsTest : public LocalClusterTest {
 protected:
  void SetUp() override {
    LocalClusterTest::SetUp();
    SpawnOptions o;
    o.argv = {
        "sh", "-c",
        "set -e; cd " + dir_ +
            "; openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
            "-subj /CN=skyrl-test-ca 2>/dev/null;"
            " openssl req -newkey rsa:2048 -nodes -keyout node.key -out node.csr -subj /CN=skyrl-node "
            "2>/dev/null;"
            " printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth,clientAuth\\n' "
            "> ext.cnf;"
            " openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out node.pem -days 2 "
            "-extfile ext.cnf 2>/dev/null"};
    auto p = Subprocess::Start(o);
    ASSERT_TRUE(p.ok()) << p.status();
    if (!p->Wait().ok()) GTEST_SKIP() << "openssl could not make a test CA";
    // Daemons inherit these; this process's own channels read them on first use.
    setenv("SKYRL_TLS_CERT", (dir_ + "/node.pem").c_str(), 1);
    setenv("SKYRL_TLS_KEY", (dir_ + "/node.key").c_str(), 1);
    setenv("SKYRL_TLS_CA", (dir_ + "/ca.pem").c_str(), 1);
  }
};

TEST_F(TlsTest, TheClusterSpeaksMutualTlsAndRefusesOthers) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=2");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }))
      << "the worker registers over TLS";
  auto client = Client::Connect(address_, Token());
  ASSERT_TRUE(client.ok());
  absl::StatusOr<ActorHandle> a = (*client)->CreateActor("echo");
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<std::string> echo = (*client)->Call(*a, "echo", "over tls");
  ASSERT_TRUE(echo.ok()) << echo.status();
  EXPECT_EQ(*echo, "over tls");
  int code = -1;
  std::string status = RunCli({"status"}, &code);
  EXPECT_EQ(code, 0) << status;
  EXPECT_NE(status.find("Actors: 1 (ALIVE 1)"), std::string::npos) << status;

  auto list = [&](std::shared_ptr<grpc::ChannelCredentials> creds) {
    auto stub = v1::NodeService::NewStub(grpc::CreateChannel(address_, creds));
    grpc::ClientContext ctx;
    rpc::AttachToken(&ctx, Token());
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    v1::ListNodesReply reply;
    return stub->ListNodes(&ctx, {}, &reply);
  };
  EXPECT_FALSE(list(grpc::InsecureChannelCredentials()).ok()) << "plaintext is refused";
  grpc::SslCredentialsOptions no_cert;
  std::ifstream ca(dir_ + "/ca.pem");
  std::stringstream pem;
  pem << ca.rdbuf();
  no_cert.pem_root_certs = pem.str();
  EXPECT_FALSE(list(grpc::SslCredentials(no_cert)).ok()) << "a client without a certificate is refused";
  std::ifstream log(dir_ + "/head.log");
  std::stringstream head_log;
  head_log << log.rdbuf();
  EXPECT_NE(head_log.str().find("(mutual TLS)"), std::string::npos) << head_log.str();
}

}  // namespace
}  // namespace skyrl::testing
