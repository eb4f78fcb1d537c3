#include "runtime/rpc/auth.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "runtime/rpc/status.h"
#include "tests/util/paths.h"

namespace skyrl::rpc {
namespace {

class LoadTokenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ = testing::MakeTempDir("home");
    old_home_ = getenv("HOME") ? getenv("HOME") : "";
    setenv("HOME", home_.c_str(), 1);
    unsetenv("SKYRL_TOKEN");
  }
  void TearDown() override {
    setenv("HOME", old_home_.c_str(), 1);
    std::filesystem::remove_all(home_);
  }
  std::string home_, old_home_;
};

TEST_F(LoadTokenTest, HeadCreatesAPrivateTokenOnceAndClientsFindIt) {
  EXPECT_TRUE(absl::IsNotFound(LoadToken("", false).status()));
  auto created = LoadToken("", true);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->size(), 64u);
  struct stat st {};
  ASSERT_EQ(stat((home_ + "/.skyrl/token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((home_ + "/.skyrl").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(*LoadToken("", false), *created);
  EXPECT_EQ(*LoadToken("", true), *created) << "a second start reuses the token";
}

TEST_F(LoadTokenTest, FlagThenEnvironmentThenFile) {
  ASSERT_TRUE(LoadToken("", true).ok());
  setenv("SKYRL_TOKEN", "from-the-environment", 1);
  EXPECT_EQ(*LoadToken("", false), "from-the-environment");
  std::string file = home_ + "/tok";
  std::ofstream(file) << "  from-the-flag-file\n";
  EXPECT_EQ(*LoadToken(file, false), "from-the-flag-file");
}

TEST_F(LoadTokenTest, BadTokensAreRejectedNamingTheSource) {
  std::string file = home_ + "/short";
  std::ofstream(file) << "short";
  auto s = LoadToken(file, false).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("--token-file"), std::string::npos) << s;
  EXPECT_NE(LoadToken(home_ + "/missing", false).status().message().find("--token-file"), std::string::npos);
  setenv("SKYRL_TOKEN", "has a space in it, too long", 1);
  EXPECT_NE(LoadToken("", false).status().message().find("$SKYRL_TOKEN"), std::string::npos);
}

TEST(StatusTest, CodesAndMessagesSurviveTheRoundTrip) {
  for (absl::Status s : {absl::OkStatus(), absl::NotFoundError("node x"),
                         absl::UnauthenticatedError("no token"), absl::UnavailableError("down")}) {
    grpc::Status g = ToGrpc(s);
    EXPECT_EQ(int(g.error_code()), int(s.code()));
    EXPECT_EQ(FromGrpc(g), s);
  }
}

TEST(StatusTest, AnErrorWithoutAMessageSaysSo) {
  grpc::Status g = ToGrpc(absl::InternalError(""));
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(g.error_message(), "INTERNAL with no message from this server");
  absl::Status s = FromGrpc(grpc::Status(grpc::StatusCode::UNAVAILABLE, ""));
  EXPECT_TRUE(absl::IsUnavailable(s));
  EXPECT_EQ(s.message(), "UNAVAILABLE with no message from the peer or gRPC");
}

}  // namespace
}  // namespace skyrl::rpc
