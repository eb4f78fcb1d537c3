// Redis-specific behaviour: URLs, authentication, namespaces, and recovery when the server is
// killed and restarted under a running client.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "runtime/store/redis/redis_store.h"
#include "tests/util/redis_server.h"

namespace skyrl::store {
namespace {

TEST(RedisUrlTest, ParsesEveryPart) {
  auto o = ParseRedisUrl("redis://admin:pw@db.example:6400/3");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->user, "admin");
  EXPECT_EQ(o->password, "pw");
  EXPECT_EQ(o->host, "db.example");
  EXPECT_EQ(o->port, 6400);
  EXPECT_EQ(o->db, 3);
  auto bare = ParseRedisUrl("redis://10.0.0.1");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->port, 6379);
  EXPECT_EQ(bare->db, 0);
  EXPECT_EQ(ParseRedisUrl("redis://:pw@h:1")->password, "pw");
}

TEST(RedisUrlTest, RejectsMalformedUrlsNamingThePart) {
  EXPECT_NE(ParseRedisUrl("http://h:1").status().message().find("redis://"), std::string::npos);
  EXPECT_NE(ParseRedisUrl("redis://h:99999").status().message().find("port"), std::string::npos);
  EXPECT_NE(ParseRedisUrl("redis://h:1/x").status().message().find("database"), std::string::npos);
  EXPECT_NE(ParseRedisUrl("redis://:1").status().message().find("host"), std::string::npos);
  EXPECT_NE(ParseRedisUrl("redis://pw@h:1").status().message().find("password"), std::string::npos);
  EXPECT_TRUE(absl::IsInvalidArgument(OpenStore("mysql://x", "ns").status()));
}

TEST(RedisStoreTest, WrongPasswordIsPermissionDeniedNotAHang) {
  auto server = testing::RedisServer::Start("right");
  ASSERT_TRUE(server.ok()) << server.status();
  RedisOptions o = *ParseRedisUrl("redis://:wrong@127.0.0.1:" + std::to_string((*server)->port()));
  auto store = RedisStore::Connect(o);
  EXPECT_TRUE(absl::IsPermissionDenied(store.status())) << store.status();
}

TEST(RedisStoreTest, UnreachableServerFailsWithinTheWindowNamingTheOperation) {
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok());
  RedisOptions o;
  o.port = *port;
  o.reconnect_window = absl::Milliseconds(300);
  absl::Time start = absl::Now();
  auto store = RedisStore::Connect(o);
  EXPECT_TRUE(absl::IsUnavailable(store.status())) << store.status();
  EXPECT_NE(store.status().message().find("connect"), std::string::npos) << store.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(RedisStoreTest, NamespacesKeepClustersApart) {
  auto server = testing::RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  auto a = OpenStore((*server)->url(), "cluster-a");
  auto b = OpenStore((*server)->url(), "cluster-b");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Put("nodes", "n1", "a").ok());
  EXPECT_TRUE(absl::IsNotFound((*b)->Get("nodes", "n1").status()));
}

TEST(RedisStoreTest, ServerDownBeyondTheWindowGivesUnavailableNamingTheKey) {
  auto server = testing::RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  RedisOptions o = *ParseRedisUrl((*server)->url());
  o.reconnect_window = absl::Milliseconds(300);
  auto store = RedisStore::Connect(o);
  ASSERT_TRUE(store.ok());
  (*server)->Kill(SIGKILL);
  absl::Status s = (*store)->Put("nodes", "node-7", "v");
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find("put nodes/node-7"), std::string::npos) << s;
  // And it recovers once the server is back.
  ASSERT_TRUE((*server)->Restart().ok());
  EXPECT_TRUE((*store)->Put("nodes", "node-7", "v").ok());
}

// The server is killed with SIGKILL in the middle of a stream of writes and restarted on the
// same data. The client must reconnect by itself, and every write it acknowledged must be there.
TEST(RedisStoreTest, KilledAndRestartedServerLosesNothingAcknowledged) {
  auto server = testing::RedisServer::Start("pw");
  ASSERT_TRUE(server.ok()) << server.status();
  RedisOptions o = *ParseRedisUrl((*server)->url());
  o.ns = "restart";
  o.reconnect_window = absl::Seconds(20);
  auto connected = RedisStore::Connect(o);
  ASSERT_TRUE(connected.ok()) << connected.status();
  RedisStore& store = **connected;

  std::atomic<int> acknowledged{0};
  std::atomic<bool> stop{false};
  std::vector<std::string> failures;
  std::thread writer([&] {
    for (int i = 0; !stop.load() && i < 200000; ++i) {
      absl::Status s = store.Put("jobs", "job-" + std::to_string(i), "value-" + std::to_string(i));
      if (!s.ok()) {
        failures.push_back(std::string(s.message()));
        break;
      }
      acknowledged = i + 1;
    }
  });
  while (acknowledged.load() < 300) absl::SleepFor(absl::Milliseconds(1));
  (*server)->Kill(SIGKILL);
  int at_kill = acknowledged.load();
  absl::SleepFor(absl::Milliseconds(300));  // writes stall while the server is down
  ASSERT_TRUE((*server)->Restart().ok());
  absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (acknowledged.load() < at_kill + 300 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  stop = true;
  writer.join();
  ASSERT_TRUE(failures.empty()) << failures[0];
  EXPECT_GE(acknowledged.load(), at_kill + 300) << "writes did not resume after the restart";
  EXPECT_GE(store.reconnects(), 1);

  auto all = store.Scan("jobs", "job-");
  ASSERT_TRUE(all.ok()) << all.status();
  std::set<std::string> keys;
  for (const auto& e : *all) keys.insert(e.key);
  for (int i = 0; i < acknowledged.load(); ++i) {
    std::string key = "job-" + std::to_string(i);
    ASSERT_TRUE(keys.contains(key)) << "acknowledged write " << key << " was lost";
  }
  EXPECT_EQ(*store.Get("jobs", "job-0"), "value-0");
  EXPECT_EQ(*store.Get("jobs", "job-" + std::to_string(at_kill - 1)), "value-" + std::to_string(at_kill - 1));
}

}  // namespace
}  // namespace skyrl::store
