// TCP-specific behaviour: the wire protocol against hand-written peers that die, stall or lie,
// and whole syncs across processes (a file rendezvous, one process per rank).
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <utility>  // before Boost 1.74's asio, whose awaitable.hpp needs std::exchange in C++20

#include <boost/asio.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/weight_sync/sync_harness.h"
#include "weight_sync/checksum.h"
#include "weight_sync/delta_codec.h"
#include "weight_sync/plan/hf_params.h"
#include "weight_sync/rendezvous.h"
#include "weight_sync/tcp/direct_write.h"  // SharedMappings
#include "weight_sync/tcp/listener.h"      // HostIdentity
#include "weight_sync/tcp/tcp_transport.h"

namespace skyrl::weight_sync {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using ::testing::AnyOf;
using testing::ForEachMatrixEngines;
using ::testing::HasSubstr;
using testing::MakeWorld;
using testing::MatrixTrainer;
using testing::MatrixTrainers;
using testing::SmallStep;
using testing::World;

// The wire format, written out independently of the implementation (it is a contract).
std::vector<uint8_t> HelloBytes(uint64_t version, uint32_t sender, uint32_t receiver, uint64_t bytes,
                                uint64_t bucket, uint32_t flags) {
  std::vector<uint8_t> b(48, 0);
  auto put32 = [&](size_t at, uint32_t v) { std::memcpy(&b[at], &v, 4); };
  auto put64 = [&](size_t at, uint64_t v) { std::memcpy(&b[at], &v, 8); };
  put32(0, 0x53574B53);
  put32(4, 4);  // protocol
  put64(8, version);
  put32(16, sender);
  put32(20, receiver);
  put64(24, bytes);
  put64(32, bucket);
  put32(40, flags);
  return b;
}
std::vector<uint8_t> BucketHeader(uint32_t index, uint64_t len, uint64_t checksum) {
  std::vector<uint8_t> b(24, 0);
  std::memcpy(&b[0], &index, 4);
  std::memcpy(&b[8], &len, 8);
  std::memcpy(&b[16], &checksum, 8);
  return b;
}
template <typename Socket>
uint32_t ReadStatusCode(Socket& s, std::string* message = nullptr) {
  uint8_t ack[8];
  asio::read(s, asio::buffer(ack));
  uint32_t code, len;
  std::memcpy(&code, ack, 4);
  std::memcpy(&len, ack + 4, 4);
  std::string msg(len, '\0');
  if (len) asio::read(s, asio::buffer(msg));
  if (message != nullptr) *message = msg;
  return code;
}

Model OneMatrix(int64_t rows = 256, int64_t cols = 256) {
  Model m;
  m.num_layers = 1;
  Param p;
  p.name = "w";
  p.shape = {rows, cols};
  p.split_dim = 0;  // each TP rank sends its half
  p.layer = 0;
  m.params.push_back(p);
  return m;
}

// The small models of the cross-process tests.
TransformerConfig SmallDense() {
  TransformerConfig c;
  c.layers = 4;
  c.hidden = 64;
  c.intermediate = 128;
  c.heads = 4;
  c.kv_heads = 4;
  c.head_dim = 16;
  c.vocab = 128;
  return c;
}
TransformerConfig SmallMoe() {
  TransformerConfig c = SmallDense();
  c.experts = 8;
  c.moe_intermediate = 32;
  return c;
}

class TcpPeerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto w = MakeWorld(OneMatrix(), Layout::Of(ModelParallel{}), Layout::Engines(1, ModelParallel{}));
    ASSERT_TRUE(w.ok());
    world_ = std::move(*w);
    TcpOptions o;
    o.rendezvous = &rdv_;
    o.receiver_rank = 0;
    o.transfer.io_timeout = absl::Milliseconds(500);
    o.transfer.checksums = false;
    Configure(o);
    auto t = CreateTcpTransport(o);
    ASSERT_TRUE(t.ok()) << t.status();
    receiver_ = std::move(*t);
    shard_ = std::make_unique<VersionedShard>(world_->rlayout[0].Bytes());
    ASSERT_NO_FATAL_FAILURE(Prepare(*shard_));
    receive_ =
        std::thread([this] { result_ = receiver_->Receive(Version(), world_->recv_sched[0], *shard_); });
  }
  // For variants: the receiver's options, its shard before the sync, the version it receives.
  virtual void Configure(TcpOptions&) {}
  virtual void Prepare(VersionedShard&) {}
  virtual uint64_t Version() const { return 1; }
  void TearDown() override {
    if (receive_.joinable()) receive_.join();
  }
  tcp::socket Connect() {
    auto where = rdv_.Get("weight_sync/receiver/0", absl::Seconds(1));
    EXPECT_TRUE(where.ok());
    std::string host = where->substr(0, where->find(':'));
    int port = std::atoi(where->substr(where->find(':') + 1).c_str());
    tcp::socket s(io_);
    s.connect(tcp::endpoint(asio::ip::make_address(host), port));
    return s;
  }
  // Over the receiver's abstract Unix socket (its published local= name).
  asio::local::stream_protocol::socket ConnectLocal() {
    auto where = rdv_.Get("weight_sync/receiver/0", absl::Seconds(1));
    EXPECT_TRUE(where.ok());
    const size_t at = where->find(" local=") + 7;
    std::string name = where->substr(at, where->find(' ', at) - at);
    asio::local::stream_protocol::socket s(io_);
    s.connect(asio::local::stream_protocol::endpoint(std::string(1, '\0') + name));
    return s;
  }
  absl::Status Finish() {
    receive_.join();
    return result_;
  }
  int64_t Bytes() const { return world_->recv_sched[0].peers[0].bytes; }

  InMemoryRendezvous rdv_;
  std::unique_ptr<World> world_;
  std::unique_ptr<Transport> receiver_;
  std::unique_ptr<VersionedShard> shard_;
  std::thread receive_;
  absl::Status result_;
  asio::io_context io_;
};

TEST_F(TcpPeerTest, SenderDyingMidBucketFailsTheReceiverAndKeepsTheVersion) {
  tcp::socket s = Connect();
  asio::write(s, asio::buffer(HelloBytes(1, 0, 0, Bytes(), Bytes(), 0)));
  ASSERT_EQ(ReadStatusCode(s), 0u);  // welcome
  std::vector<uint8_t> half(Bytes() / 2, 7);
  asio::write(s, asio::buffer(BucketHeader(0, Bytes(), 0)));
  asio::write(s, asio::buffer(half));
  s.close();  // dies
  absl::Status st = Finish();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("from sender 0"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("peer closed the connection"));
  EXPECT_EQ(shard_->Current().version, 0u);
  EXPECT_EQ(shard_->PendingVersion(), 0u);
  EXPECT_TRUE(*shard_->Current().bytes == std::vector<uint8_t>(Bytes(), 0));
}

TEST_F(TcpPeerTest, StalledSenderTimesOut) {
  tcp::socket s = Connect();
  asio::write(s, asio::buffer(HelloBytes(1, 0, 0, Bytes(), Bytes(), 0)));
  absl::Status st = Finish();  // nothing more is sent
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("bucket 0 header: timed out"));
  EXPECT_EQ(shard_->Current().version, 0u);
}

TEST_F(TcpPeerTest, CorruptBucketIsRejectedWithDataLossOnBothSides) {
  tcp::socket s = Connect();
  asio::write(s, asio::buffer(HelloBytes(1, 0, 0, Bytes(), Bytes(), /*checksums=*/1)));
  ASSERT_EQ(ReadStatusCode(s), 0u);
  std::vector<uint8_t> data(Bytes(), 9);
  Checksum sum;
  sum.Update(data.data(), data.size());
  data[100] ^= 1;  // flipped in flight
  asio::write(s, asio::buffer(BucketHeader(0, Bytes(), sum.Digest())));
  asio::write(s, asio::buffer(data));
  EXPECT_EQ(ReadStatusCode(s), static_cast<uint32_t>(absl::StatusCode::kDataLoss));
  absl::Status st = Finish();
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("checksum mismatch"));
  EXPECT_EQ(shard_->Current().version, 0u);
}

TEST_F(TcpPeerTest, ForeignConnectionsAreRefusedAndTheRightSenderStillServed) {
  {
    tcp::socket junk = Connect();
    std::vector<uint8_t> garbage(48, 0xAB);
    asio::write(junk, asio::buffer(garbage));
    EXPECT_EQ(ReadStatusCode(junk), static_cast<uint32_t>(absl::StatusCode::kFailedPrecondition));
  }
  tcp::socket s = Connect();
  asio::write(s, asio::buffer(HelloBytes(1, 0, 0, Bytes(), Bytes(), 0)));
  ASSERT_EQ(ReadStatusCode(s), 0u);
  std::vector<uint8_t> data(Bytes(), 5);
  asio::write(s, asio::buffer(BucketHeader(0, Bytes(), 0)));
  asio::write(s, asio::buffer(data));
  EXPECT_EQ(ReadStatusCode(s), 0u);  // final confirmation
  ASSERT_TRUE(Finish().ok()) << result_;
  EXPECT_EQ(shard_->Current().version, 1u);
  EXPECT_TRUE(*shard_->Current().bytes == data);
}

// ---- direct writes (the test plays the sender) ----

// The receiver's grant of direct writes, read off a Unix socket: the welcome with the
// staging buffer's descriptor attached, then the grant and its runs.
struct Grant {
  int fd = -1;
  std::string message;
  uint64_t id = 0, size = 0, keep = 0;
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  ~Grant() {
    if (fd >= 0) close(fd);
  }
};
void ReadGrant(asio::local::stream_protocol::socket& s, Grant& g) {
  uint8_t ack[8];
  iovec iov{ack, sizeof ack};
  alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctrl;
  msg.msg_controllen = sizeof ctrl;
  const ssize_t n = recvmsg(s.native_handle(), &msg, MSG_WAITALL);
  ASSERT_EQ(n, 8);
  if (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr && cm->cmsg_type == SCM_RIGHTS)
    std::memcpy(&g.fd, CMSG_DATA(cm), sizeof(int));
  uint32_t code, len;
  std::memcpy(&code, ack, 4);
  std::memcpy(&len, ack + 4, 4);
  ASSERT_EQ(code, 0u);
  g.message.resize(len);
  asio::read(s, asio::buffer(g.message));
  if (g.message != "direct-write") return;
  uint8_t head[32];
  asio::read(s, asio::buffer(head));
  uint32_t count;
  std::memcpy(&g.id, head, 8);
  std::memcpy(&g.size, head + 8, 8);
  std::memcpy(&g.keep, head + 16, 8);
  std::memcpy(&count, head + 24, 4);
  std::vector<uint64_t> runs(2 * size_t{count});
  asio::read(s, asio::buffer(runs));
  for (uint32_t i = 0; i < count; ++i) g.runs.push_back({runs[2 * i], runs[2 * i + 1]});
}
std::vector<uint8_t> WrittenBucketHeader(uint32_t index, uint64_t len, uint64_t checksum, uint32_t how = 1) {
  std::vector<uint8_t> b = BucketHeader(index, len, checksum);
  std::memcpy(&b[4], &how, 4);
  return b;
}

TEST_F(TcpPeerTest, AnOfferOfDirectWritesIsGrantedTheSealedStagingBufferAndTheSendersRuns) {
  if (tcp_internal::HostIdentity().empty())
    GTEST_SKIP() << "no boot id or network namespace in /proc: no same-host path";
  auto s = ConnectLocal();
  asio::write(s, asio::buffer(HelloBytes(1, 0, 0, Bytes(), Bytes(), /*direct writes=*/2)));
  Grant g;
  ReadGrant(s, g);
  ASSERT_EQ(g.message, "direct-write");
  ASSERT_GE(g.fd, 0) << "the staging buffer's descriptor rides on the welcome";
  EXPECT_TRUE(fcntl(g.fd, F_GET_SEALS) & F_SEAL_SHRINK);
  EXPECT_EQ(g.size, static_cast<uint64_t>(shard_->Bytes()));
  EXPECT_EQ(g.keep, shard_->Current().bytes->id()) << "the buffer served now is the one to keep mapped";
  // One engine at TP 1: the sender's stream is the whole shard, in one run.
  ASSERT_EQ(g.runs.size(), 1u);
  EXPECT_EQ(g.runs[0], std::make_pair(uint64_t{0}, static_cast<uint64_t>(Bytes())));
  // Write the bytes where the grant says, then say so.
  auto* buf = static_cast<uint8_t*>(mmap(nullptr, g.size, PROT_READ | PROT_WRITE, MAP_SHARED, g.fd, 0));
  ASSERT_NE(buf, MAP_FAILED);
  std::vector<uint8_t> data(Bytes());
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
  uint64_t at = 0;
  for (auto [off, len] : g.runs) {
    std::memcpy(buf + off, data.data() + at, len);
    at += len;
  }
  munmap(buf, g.size);
  Checksum sum;
  sum.Update(data.data(), data.size());
  asio::write(s, asio::buffer(WrittenBucketHeader(0, Bytes(), sum.Digest())));
  EXPECT_EQ(ReadStatusCode(s), 0u);  // final confirmation
  ASSERT_TRUE(Finish().ok()) << result_;
  EXPECT_TRUE(*shard_->Current().bytes == data);
  EXPECT_EQ(shard_->Current().bytes->id(), g.id) << "the granted buffer went live";
}

TEST_F(TcpPeerTest, AGrantedSenderMayStillStreamItsBuckets) {
  if (tcp_internal::HostIdentity().empty())
    GTEST_SKIP() << "no boot id or network namespace in /proc: no same-host path";
  auto s = ConnectLocal();
  asio::write(s, asio::buffer(HelloBytes(1, 0, 0, Bytes(), Bytes(), 2)));
  Grant g;
  ReadGrant(s, g);
  ASSERT_EQ(g.message, "direct-write");
  std::vector<uint8_t> data(Bytes(), 4);
  asio::write(s, asio::buffer(BucketHeader(0, Bytes(), 0)));  // streamed (how = 0)
  asio::write(s, asio::buffer(data));
  EXPECT_EQ(ReadStatusCode(s), 0u);
  ASSERT_TRUE(Finish().ok()) << result_;
  EXPECT_TRUE(*shard_->Current().bytes == data);
}

TEST_F(TcpPeerTest, OverTcpNoGrantIsGivenAndABucketClaimedWrittenIsDataLoss) {
  tcp::socket s = Connect();
  asio::write(s, asio::buffer(HelloBytes(1, 0, 0, Bytes(), Bytes(), 2)));
  std::string answer = "unset";
  ASSERT_EQ(ReadStatusCode(s, &answer), 0u);
  EXPECT_EQ(answer, "") << "descriptors cannot cross TCP";
  asio::write(s, asio::buffer(WrittenBucketHeader(0, Bytes(), 0)));
  EXPECT_EQ(ReadStatusCode(s), static_cast<uint32_t>(absl::StatusCode::kDataLoss));
  absl::Status st = Finish();
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("which it was not given"));
  EXPECT_EQ(shard_->Current().version, 0u);
}

TEST_F(TcpPeerTest, AnUnknownBucketModeIsDataLoss) {
  tcp::socket s = Connect();
  asio::write(s, asio::buffer(HelloBytes(1, 0, 0, Bytes(), Bytes(), 0)));
  ASSERT_EQ(ReadStatusCode(s), 0u);
  asio::write(s, asio::buffer(WrittenBucketHeader(0, Bytes(), 0, /*how=*/7)));
  absl::Status st = Finish();
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("unknown way of sending (7)"));
}

// A receiver (here a fake one on a Unix socket) whose grant the sender must not trust blindly.
// Kinds: 0 an unsealed buffer (the sender streams instead), 1 a run outside the buffer
// (DataLoss), 2 no descriptor at all (the sender streams).
class TcpBadGrantTest : public ::testing::TestWithParam<int> {};

TEST_P(TcpBadGrantTest, TheSenderStreamsOrFailsButNeverWritesOutsideTheGrant) {
  if (tcp_internal::HostIdentity().empty())
    GTEST_SKIP() << "no boot id or network namespace in /proc: no same-host path";
  const int64_t bytes = 64 << 10;
  Model m = OneMatrix(128, 256);  // 64 KiB of bf16
  auto w = MakeWorld(m, Layout::Of(ModelParallel{}), Layout::Engines(1, ModelParallel{}));
  ASSERT_TRUE(w.ok());
  ASSERT_EQ((*w)->send_sched[0].peers[0].bytes, bytes);
  const std::string name = absl::StrCat("skyrl-test-bad-grant-", getpid(), "-", GetParam());
  asio::io_context io;
  asio::local::stream_protocol::acceptor acc(
      io, asio::local::stream_protocol::endpoint(std::string(1, '\0') + name));
  InMemoryRendezvous rdv;
  ASSERT_TRUE(rdv.Put("weight_sync/receiver/0",
                      absl::StrCat("127.0.0.1:9 local=", name, " host=", tcp_internal::HostIdentity()))
                  .ok());
  std::vector<uint8_t> received;
  bool streamed = false;
  uint8_t* fake_buffer = nullptr;  // the fake receiver's view of the buffer it granted
  std::thread fake([&] {
    asio::local::stream_protocol::socket s(io);
    acc.accept(s);
    uint8_t hello[48];
    asio::read(s, asio::buffer(hello));
    // The buffer: a memfd, sealed unless the case says otherwise.
    const int fd = memfd_create("fake", MFD_ALLOW_SEALING);
    ASSERT_EQ(ftruncate(fd, bytes), 0);
    if (GetParam() != 0) fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
    std::string frame(8 + 12 + 32 + 16, '\0');
    const uint32_t mlen = 12, count = 1;
    std::memcpy(&frame[4], &mlen, 4);
    std::memcpy(&frame[8], "direct-write", 12);
    const uint64_t id = 77, size = bytes, keep = 0, off = GetParam() == 1 ? 16 : 0, len = bytes;
    std::memcpy(&frame[20], &id, 8);
    std::memcpy(&frame[28], &size, 8);
    std::memcpy(&frame[36], &keep, 8);
    std::memcpy(&frame[44], &count, 4);
    std::memcpy(&frame[52], &off, 8);
    std::memcpy(&frame[60], &len, 8);
    iovec iov{frame.data(), frame.size()};
    alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (GetParam() != 2) {
      msg.msg_control = ctrl;
      msg.msg_controllen = sizeof ctrl;
      cmsghdr* cm = CMSG_FIRSTHDR(&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    }
    ASSERT_EQ(sendmsg(s.native_handle(), &msg, 0), static_cast<ssize_t>(frame.size()));
    fake_buffer = static_cast<uint8_t*>(mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0));
    close(fd);
    if (GetParam() == 1) return;  // the sender gives up on the grant
    uint8_t hdr[24];
    asio::read(s, asio::buffer(hdr));
    uint32_t how;
    std::memcpy(&how, hdr + 4, 4);
    streamed = how == 0;
    received.resize(bytes);
    if (streamed) asio::read(s, asio::buffer(received));
    uint8_t ok[8] = {0};
    asio::write(s, asio::buffer(ok));
  });
  TcpStats stats;
  TcpOptions o;
  o.rendezvous = &rdv;
  o.stats = &stats;
  o.transfer.io_timeout = absl::Seconds(5);
  auto sender = CreateTcpTransport(o);
  ASSERT_TRUE(sender.ok());
  std::vector<uint8_t> shard(bytes, 9);
  absl::Status st = (*sender)->Send(1, (*w)->send_sched[0], absl::MakeConstSpan(shard));
  fake.join();
  EXPECT_EQ(stats.direct_write_bytes.load(), 0);
  ASSERT_NE(fake_buffer, MAP_FAILED);
  EXPECT_TRUE(std::all_of(fake_buffer, fake_buffer + bytes, [](uint8_t x) { return x == 0; }))
      << "the sender wrote into a buffer it must not use";
  munmap(fake_buffer, bytes);
  if (GetParam() == 1) {
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr("lies outside"));
  } else {
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_TRUE(streamed);
    EXPECT_TRUE(received == shard);
  }
}

std::string BadGrantName(const ::testing::TestParamInfo<int>& i) {
  static const char* const kNames[] = {"unsealed", "outside", "no_descriptor"};
  return kNames[i.param];
}
INSTANTIATE_TEST_SUITE_P(Grants, TcpBadGrantTest, ::testing::Values(0, 1, 2), BadGrantName);

// A sender that dies after being granted an in-place receiver's buffer may still be writing
// into it: the torn shard's next sync must get a fresh buffer, not that one.
TEST(TcpDirectWriteTest, AFailedGrantedSyncNeverReusesTheGrantedBuffer) {
  if (tcp_internal::HostIdentity().empty())
    GTEST_SKIP() << "no boot id or network namespace in /proc: no same-host path";
  auto w = MakeWorld(OneMatrix(), Layout::Of(ModelParallel{}), Layout::Engines(1, ModelParallel{}));
  ASSERT_TRUE(w.ok());
  InMemoryRendezvous rdv;
  TcpOptions o;
  o.rendezvous = &rdv;
  o.receiver_rank = 0;
  o.transfer.io_timeout = absl::Seconds(2);
  o.transfer.staging = Staging::kInPlace;
  auto receiver = CreateTcpTransport(o);
  ASSERT_TRUE(receiver.ok());
  VersionedShard shard((*w)->rlayout[0].Bytes());
  const int64_t bytes = (*w)->recv_sched[0].peers[0].bytes;
  auto where = rdv.Get("weight_sync/receiver/0", absl::Seconds(1));
  ASSERT_TRUE(where.ok());
  const size_t at = where->find(" local=") + 7;
  const std::string name = where->substr(at, where->find(' ', at) - at);
  asio::io_context io;
  std::vector<uint64_t> granted;
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::Status result;
    std::thread rt([&] { result = (*receiver)->Receive(1, (*w)->recv_sched[0], shard); });
    {
      asio::local::stream_protocol::socket s(io);
      s.connect(asio::local::stream_protocol::endpoint(std::string(1, '\0') + name));
      asio::write(s, asio::buffer(HelloBytes(1, 0, 0, bytes, bytes, 2)));
      Grant g;
      ReadGrant(s, g);
      ASSERT_EQ(g.message, "direct-write");
      granted.push_back(g.id);
    }  // the sender dies holding the grant
    rt.join();
    EXPECT_EQ(result.code(), absl::StatusCode::kUnavailable) << result;
    EXPECT_EQ(shard.Current().bytes, nullptr) << "an in-place sync that failed tears the shard";
  }
  EXPECT_NE(granted[0], granted[1])
      << "the torn shard's next sync must not reuse a buffer a sender may write";
}

TEST(TcpDirectWriteTest, SharedMappingsKeepTheGrantedAndTheServedBufferPerReceiver) {
  auto a = ShardBytes::Make(8192), b = ShardBytes::Make(8192), c = ShardBytes::Make(8192),
       d = ShardBytes::Make(8192);
  tcp_internal::SharedMappings m;
  auto pa = m.Map(0, a->id(), 0, 8192, a->fd());
  ASSERT_TRUE(pa.ok()) << pa.status();
  (*pa)[100] = 5;
  EXPECT_EQ((*a)[100], 5) << "the mapping is the receiver's buffer";
  ASSERT_TRUE(m.Map(0, b->id(), a->id(), 8192, b->fd()).ok());  // b granted, a served
  ASSERT_TRUE(m.Map(1, d->id(), 0, 8192, d->fd()).ok());        // another receiver
  EXPECT_EQ(m.size(), 3u);
  auto again = m.Map(0, a->id(), b->id(), 8192, -1);  // a again: mapped already, no descriptor needed
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *pa);
  ASSERT_TRUE(m.Map(0, c->id(), b->id(), 8192, c->fd()).ok());  // a is neither granted nor served now
  EXPECT_EQ(m.size(), 3u) << "receiver 0: b and c; receiver 1: d";
  m.Drop(0);
  EXPECT_EQ(m.size(), 1u);
  // Buffers a sender must refuse: unsealed, or smaller than the grant says.
  const int unsealed = memfd_create("unsealed", 0);
  ASSERT_EQ(ftruncate(unsealed, 8192), 0);
  EXPECT_EQ(m.Map(2, 1, 0, 8192, unsealed).status().code(), absl::StatusCode::kInvalidArgument);
  close(unsealed);
  EXPECT_EQ(m.Map(2, 2, 0, 16384, c->fd()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.size(), 1u);
}

// Over both sender paths: with zero-copy sends the kernel raises SIGPIPE on a closed peer,
// which must fail the sync, not kill the process.
// A receiver for every rank of `w`, with the sender's options `o` (without its stats), and
// an empty shard each.
void MakeReceivers(const World& w, const TcpOptions& o, std::vector<std::unique_ptr<Transport>>& receivers,
                   std::vector<std::unique_ptr<VersionedShard>>& shards) {
  for (int r = 0; r < w.plan.num_receivers; ++r) {
    TcpOptions ro = o;
    ro.receiver_rank = r;
    ro.stats = nullptr;
    auto t = CreateTcpTransport(ro);
    ASSERT_TRUE(t.ok()) << t.status();
    receivers.push_back(std::move(*t));
    shards.push_back(std::make_unique<VersionedShard>(w.rlayout[r].Bytes()));
  }
}

class TcpSenderTest : public ::testing::TestWithParam<bool> {};

TEST_P(TcpSenderTest, ReceiverDyingMidStreamFailsTheSenderNamingIt) {
  auto w = MakeWorld(OneMatrix(4096, 4096), Layout::Of(ModelParallel{}), Layout::Engines(1, ModelParallel{}));
  ASSERT_TRUE(w.ok());
  InMemoryRendezvous rdv;
  asio::io_context io;
  tcp::acceptor acc(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  ASSERT_TRUE(
      rdv.Put("weight_sync/receiver/0", absl::StrCat("127.0.0.1:", acc.local_endpoint().port())).ok());
  std::thread fake([&] {
    tcp::socket s(io);
    acc.accept(s);
    uint8_t hello[48];
    asio::read(s, asio::buffer(hello));
    uint8_t ok[8] = {0};
    asio::write(s, asio::buffer(ok));
    std::vector<uint8_t> some(1 << 16);
    asio::read(s, asio::buffer(some));
    s.close();  // dies
  });
  TcpOptions o;
  o.rendezvous = &rdv;
  o.transfer.io_timeout = absl::Seconds(2);
  o.zero_copy_send = GetParam();
  auto sender = CreateTcpTransport(o);
  ASSERT_TRUE(sender.ok());
  std::vector<uint8_t> shard = (*w)->SenderShard(0, (*w)->Weights(1));  // 32 MiB
  absl::Status st = (*sender)->Send(1, (*w)->send_sched[0], absl::MakeConstSpan(shard));
  fake.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("sender 0 -> receiver 0"));
}

// The stats say which path the payload took, and both deliver the same bytes. Several
// parameters of a TP2 engine shard make unaligned runs that cut pages mid-way.
TEST_P(TcpSenderTest, PayloadGoesZeroCopyExactlyWhenAskedTo) {
  TransformerConfig c;
  c.layers = 2;
  c.hidden = 96;
  c.intermediate = 160;
  c.heads = 6;
  c.kv_heads = 2;
  c.head_dim = 16;
  c.vocab = 300;
  auto w = MakeWorld(MakeTransformer(c), Layout::Of(ModelParallel{.tp = 1}),
                     Layout::Engines(2, ModelParallel{.tp = 2}));
  ASSERT_TRUE(w.ok()) << w.status();
  InMemoryRendezvous rdv;
  TcpStats stats;
  TcpOptions o;
  o.rendezvous = &rdv;
  o.zero_copy_send = GetParam();
  o.same_host_direct_write = false;  // the payload goes through the sockets, spliced or copied
  o.stats = &stats;
  o.transfer.chunk_bytes = 10000;
  o.transfer.bucket_bytes = 50000;
  o.transfer.checksums = true;
  auto sender = CreateTcpTransport(o);
  ASSERT_TRUE(sender.ok());
  std::vector<std::unique_ptr<Transport>> receivers;
  std::vector<std::unique_ptr<VersionedShard>> shards;
  ASSERT_NO_FATAL_FAILURE(MakeReceivers(**w, o, receivers, shards));
  auto weights = (*w)->Weights(1);
  std::vector<absl::Status> got(receivers.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < receivers.size(); ++r)
    threads.emplace_back([&, r] { got[r] = receivers[r]->Receive(1, (*w)->recv_sched[r], *shards[r]); });
  std::vector<uint8_t> shard = (*w)->SenderShard(0, weights);
  absl::Status sent = (*sender)->Send(1, (*w)->send_sched[0], absl::MakeConstSpan(shard));
  for (auto& t : threads) t.join();
  ASSERT_TRUE(sent.ok()) << sent;
  int64_t payload = 0;
  for (size_t r = 0; r < receivers.size(); ++r) {
    ASSERT_TRUE(got[r].ok()) << got[r];
    EXPECT_TRUE(*shards[r]->Current().bytes == (*w)->Expected(r, weights)) << "receiver " << r;
    payload += (*w)->recv_sched[r].peers[0].bytes;
  }
  EXPECT_EQ(stats.spliced_bytes.load(), GetParam() ? payload : 0);
  EXPECT_EQ(stats.copied_bytes.load(), GetParam() ? 0 : payload);
}

// Receivers wake only once several MiB wait (SO_RCVLOWAT), lowered for the last chunks of a
// stream; odd chunk and bucket sizes over a 32 MiB stream must still finish well within the
// timeout rather than wait for bytes that never come.
TEST_P(TcpSenderTest, OddChunksAndBucketsOfALargeStreamFinishPromptly) {
  auto w = MakeWorld(OneMatrix(4096, 4096), Layout::Of(ModelParallel{}), Layout::Engines(1, ModelParallel{}));
  ASSERT_TRUE(w.ok());
  InMemoryRendezvous rdv;
  TcpOptions o;
  o.rendezvous = &rdv;
  o.zero_copy_send = GetParam();
  o.transfer.chunk_bytes = (3 << 20) + 1;
  o.transfer.bucket_bytes = (5 << 20) + 3;
  o.transfer.checksums = true;
  o.transfer.io_timeout = absl::Seconds(3);
  auto sender = CreateTcpTransport(o);
  o.receiver_rank = 0;
  auto receiver = CreateTcpTransport(o);
  ASSERT_TRUE(sender.ok() && receiver.ok());
  VersionedShard shard((*w)->rlayout[0].Bytes());
  for (uint64_t v = 1; v <= 2; ++v) {
    auto weights = (*w)->Weights(v);
    absl::Status got;
    std::thread rt([&] { got = (*receiver)->Receive(v, (*w)->recv_sched[0], shard); });
    std::vector<uint8_t> src = (*w)->SenderShard(0, weights);
    const absl::Time t0 = absl::Now();
    absl::Status sent = (*sender)->Send(v, (*w)->send_sched[0], absl::MakeConstSpan(src));
    rt.join();
    ASSERT_TRUE(sent.ok()) << sent;
    ASSERT_TRUE(got.ok()) << got;
    EXPECT_LT(absl::Now() - t0, absl::Seconds(2)) << "version " << v;
    EXPECT_TRUE(*shard.Current().bytes == (*w)->Expected(0, weights)) << "version " << v;
  }
}

INSTANTIATE_TEST_SUITE_P(SendPaths, TcpSenderTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "zero_copy" : "copy";
                         });

// ---- the same-host path ----

// One receiver (default options, so it offers its Unix socket) and one sender whose
// rendezvous answer the test controls; returns the sender's stats after one sync.
struct SameHostRun {
  absl::Status sent, received;
  int64_t local = 0, tcp = 0;
  int64_t payload = 0, direct = 0, spliced = 0;  // bytes: all, written directly, spliced
  bool bytes_ok = false;
};
SameHostRun SyncThrough(bool sender_same_host, const std::function<std::string(std::string)>& edit_where,
                        bool sender_direct = true, bool receiver_direct = true) {
  SameHostRun out;
  auto w = MakeWorld(OneMatrix(512, 512), Layout::Of(ModelParallel{}), Layout::Engines(1, ModelParallel{}));
  if (!w.ok()) {
    ADD_FAILURE() << w.status();
    return out;
  }
  InMemoryRendezvous receiver_rdv, sender_rdv;
  TcpOptions ro;
  ro.rendezvous = &receiver_rdv;
  ro.receiver_rank = 0;
  ro.transfer.checksums = true;
  ro.transfer.io_timeout = absl::Seconds(5);
  ro.same_host_direct_write = receiver_direct;
  auto receiver = CreateTcpTransport(ro);
  auto where = receiver_rdv.Get("weight_sync/receiver/0", absl::Seconds(1));
  if (!receiver.ok() || !where.ok()) {
    ADD_FAILURE() << receiver.status() << " / " << where.status();
    return out;
  }
  EXPECT_TRUE(sender_rdv.Put("weight_sync/receiver/0", edit_where(*where)).ok());
  TcpStats stats;
  TcpOptions so = ro;
  so.rendezvous = &sender_rdv;
  so.receiver_rank = -1;
  so.same_host_unix_socket = sender_same_host;
  so.same_host_direct_write = sender_direct;
  so.stats = &stats;
  auto sender = CreateTcpTransport(so);
  if (!sender.ok()) {
    ADD_FAILURE() << sender.status();
    return out;
  }
  auto weights = (*w)->Weights(1);
  VersionedShard shard((*w)->rlayout[0].Bytes());
  std::thread rt([&] { out.received = (*receiver)->Receive(1, (*w)->recv_sched[0], shard); });
  std::vector<uint8_t> src = (*w)->SenderShard(0, weights);
  out.sent = (*sender)->Send(1, (*w)->send_sched[0], absl::MakeConstSpan(src));
  rt.join();
  out.local = stats.local_connections.load();
  out.tcp = stats.tcp_connections.load();
  out.payload = (*w)->send_sched[0].peers[0].bytes;
  out.direct = stats.direct_write_bytes.load();
  out.spliced = stats.spliced_bytes.load();
  out.bytes_ok = shard.Current().bytes != nullptr && *shard.Current().bytes == (*w)->Expected(0, weights);
  return out;
}

// The sync delivered the right bytes over `local` Unix and `tcp` TCP connections.
void ExpectDeliveredOver(const SameHostRun& r, int64_t local, int64_t tcp) {
  ASSERT_TRUE(r.sent.ok() && r.received.ok()) << r.sent << " / " << r.received;
  EXPECT_TRUE(r.bytes_ok);
  EXPECT_EQ(r.local, local);
  EXPECT_EQ(r.tcp, tcp);
}

TEST(TcpSameHostTest, ASenderOnTheReceiversHostUsesItsUnixSocket) {
  if (tcp_internal::HostIdentity().empty())
    GTEST_SKIP() << "no boot id or network namespace in /proc: no same-host path";
  std::string published;
  SameHostRun r = SyncThrough(true, [&](std::string where) {
    published = where;
    return where;
  });
  EXPECT_THAT(published,
              ::testing::MatchesRegex(
                  "127\\.0\\.0\\.1:[0-9]+ local=skyrl-weight-sync-[0-9]+-[0-9a-f]{16} host=.+/[0-9]+"));
  ExpectDeliveredOver(r, /*local=*/1, /*tcp=*/0);
  EXPECT_EQ(r.direct, r.payload) << "the sender writes every byte into the receiver's buffer";
  EXPECT_EQ(r.spliced, 0);
}

// Descriptors cross the socket at every grant: none may be left open once the transports and
// shards are gone.
TEST(TcpSameHostTest, DirectWritesLeakNoDescriptors) {
  if (tcp_internal::HostIdentity().empty())
    GTEST_SKIP() << "no boot id or network namespace in /proc: no same-host path";
  auto open_fds = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                         std::filesystem::directory_iterator());
  };
  SyncThrough(true, [](std::string where) { return where; });  // warm-up: one-time descriptors
  const auto before = open_fds();
  for (int i = 0; i < 3; ++i) {
    SameHostRun r = SyncThrough(true, [](std::string where) { return where; });
    ExpectDeliveredOver(r, /*local=*/1, /*tcp=*/0);
    EXPECT_EQ(r.direct, r.payload);
  }
  EXPECT_EQ(open_fds(), before);
}

TEST(TcpSameHostTest, WithoutDirectWritesOnEitherSideTheBytesStreamThroughTheUnixSocket) {
  if (tcp_internal::HostIdentity().empty())
    GTEST_SKIP() << "no boot id or network namespace in /proc: no same-host path";
  for (const bool sender_allows : {false, true}) {
    SCOPED_TRACE(sender_allows ? "the receiver declines" : "the sender does not offer");
    SameHostRun r = SyncThrough(
        true, [](std::string where) { return where; }, sender_allows, !sender_allows);
    ExpectDeliveredOver(r, /*local=*/1, /*tcp=*/0);
    EXPECT_EQ(r.direct, 0);
    EXPECT_EQ(r.spliced, r.payload);
  }
}

TEST(TcpSameHostTest, ASenderThatDisallowsItUsesTcp) {
  SameHostRun r = SyncThrough(false, [](std::string where) { return where; });
  ExpectDeliveredOver(r, /*local=*/0, /*tcp=*/1);
}

TEST(TcpSameHostTest, AReceiverOnAnotherHostIsReachedOverTcp) {
  // Same name, but the identity of another machine: the sender must not dial the name.
  SameHostRun r = SyncThrough(true, [](std::string where) {
    return where.substr(0, where.find(" host=")) + " host=another-boot-id/4026531840";
  });
  ExpectDeliveredOver(r, /*local=*/0, /*tcp=*/1);
}

TEST(TcpSameHostTest, AUnixNameThatIsGoneFallsBackToTcp) {
  SameHostRun r = SyncThrough(true, [](std::string where) {
    const size_t at = where.find(" local=") + 7;
    return where.substr(0, at) + "no-such-weight-sync-socket" + where.substr(where.find(' ', at));
  });
  ExpectDeliveredOver(r, /*local=*/0, /*tcp=*/1);
}

// The rendezvous value comes from another process: a malformed one is an error naming it.
TEST(TcpSameHostTest, AMalformedAddressIsAnErrorNamingIt) {
  auto w = MakeWorld(OneMatrix(64, 64), Layout::Of(ModelParallel{}), Layout::Engines(1, ModelParallel{}));
  ASSERT_TRUE(w.ok());
  std::vector<uint8_t> src = (*w)->SenderShard(0, (*w)->Weights(1));
  for (const std::string& bad :
       {std::string("no-port"), std::string("127.0.0.1:0"), std::string("not-an-ip:80"),
        absl::StrCat("127.0.0.1:9 local=", std::string(200, 'x'), " host=", tcp_internal::HostIdentity())}) {
    InMemoryRendezvous rdv;
    ASSERT_TRUE(rdv.Put("weight_sync/receiver/0", bad).ok());
    TcpOptions o;
    o.rendezvous = &rdv;
    o.transfer.io_timeout = absl::Seconds(2);
    auto sender = CreateTcpTransport(o);
    ASSERT_TRUE(sender.ok());
    absl::Status st = (*sender)->Send(1, (*w)->send_sched[0], absl::MakeConstSpan(src));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad.substr(0, 40) << ": " << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr("rendezvous gave address")) << st;
  }
}

TEST(TcpSameHostTest, AnIpv6ReceiverIsReachable) {
  auto w = MakeWorld(OneMatrix(64, 64), Layout::Of(ModelParallel{}), Layout::Engines(1, ModelParallel{}));
  ASSERT_TRUE(w.ok());
  InMemoryRendezvous rdv;
  TcpOptions o;
  o.rendezvous = &rdv;
  o.same_host_unix_socket = false;
  o.bind_host = "::1";
  o.receiver_rank = 0;
  auto receiver = CreateTcpTransport(o);
  if (!receiver.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << receiver.status();
  o.receiver_rank = -1;
  auto sender = CreateTcpTransport(o);
  ASSERT_TRUE(sender.ok());
  auto weights = (*w)->Weights(1);
  VersionedShard shard((*w)->rlayout[0].Bytes());
  absl::Status got;
  std::thread rt([&] { got = (*receiver)->Receive(1, (*w)->recv_sched[0], shard); });
  std::vector<uint8_t> src = (*w)->SenderShard(0, weights);
  absl::Status sent = (*sender)->Send(1, (*w)->send_sched[0], absl::MakeConstSpan(src));
  rt.join();
  ASSERT_TRUE(sent.ok()) << sent;
  ASSERT_TRUE(got.ok()) << got;
  EXPECT_TRUE(*shard.Current().bytes == (*w)->Expected(0, weights));
}

TEST(TcpSameHostTest, AReceiverThatDisallowsItOffersNoUnixSocket) {
  InMemoryRendezvous rdv;
  TcpOptions o;
  o.rendezvous = &rdv;
  o.receiver_rank = 3;
  o.same_host_unix_socket = false;
  ASSERT_TRUE(CreateTcpTransport(o).ok());
  EXPECT_THAT(*rdv.Get("weight_sync/receiver/3", absl::Seconds(1)),
              ::testing::MatchesRegex("127\\.0\\.0\\.1:[0-9]+"));
}

// ---- deltas ----

// One trainer rank to two TP2 engine ranks (runs that cut rows), deltas on, streamed (the
// deltas' path; direct writes are a memcpy already): full bytes first, then deltas for a
// small step, raw frames for a change everywhere, and every byte exact each time.
class TcpDeltaTest : public ::testing::TestWithParam<Staging> {
 protected:
  void SetUp() override {
    auto w = MakeWorld(OneMatrix(512, 384), Layout::Of(ModelParallel{}),
                       Layout::Engines(1, ModelParallel{.tp = 2}));
    ASSERT_TRUE(w.ok()) << w.status();
    world_ = std::move(*w);
    TcpOptions o;
    o.rendezvous = &rdv_;
    o.delta = true;
    o.same_host_direct_write = false;
    o.transfer.chunk_bytes = 20000;
    o.transfer.bucket_bytes = 70000;
    o.transfer.staging = GetParam();
    o.stats = &stats_;
    auto sender = CreateTcpTransport(o);
    ASSERT_TRUE(sender.ok()) << sender.status();
    sender_ = std::move(*sender);
    ASSERT_NO_FATAL_FAILURE(MakeReceivers(*world_, o, receivers_, shards_));
  }
  // Syncs `weights` as `version` to every receiver; the delta bytes, wire bytes, compressed
  // and raw frames it took.
  std::array<int64_t, 4> Sync(uint64_t version, const std::vector<std::vector<uint8_t>>& weights) {
    const std::array<int64_t, 4> before = Counts();
    std::vector<absl::Status> got(receivers_.size());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < receivers_.size(); ++r)
      threads.emplace_back(
          [&, r] { got[r] = receivers_[r]->Receive(version, world_->recv_sched[r], *shards_[r]); });
    std::vector<uint8_t> shard = world_->SenderShard(0, weights);
    absl::Status sent = sender_->Send(version, world_->send_sched[0], absl::MakeConstSpan(shard));
    for (auto& t : threads) t.join();
    EXPECT_TRUE(sent.ok()) << sent;
    for (size_t r = 0; r < receivers_.size(); ++r) {
      EXPECT_TRUE(got[r].ok()) << got[r];
      EXPECT_EQ(shards_[r]->Current().version, version);
      EXPECT_TRUE(*shards_[r]->Current().bytes == world_->Expected(r, weights))
          << "receiver " << r << " version " << version;
    }
    std::array<int64_t, 4> after = Counts();
    for (int i = 0; i < 4; ++i) after[i] -= before[i];
    return after;
  }
  std::array<int64_t, 4> Counts() const {
    return {stats_.delta_bytes.load(), stats_.delta_wire_bytes.load(), stats_.delta_frames.load(),
            stats_.delta_raw_frames.load()};
  }
  int64_t Payload(int r) const { return world_->recv_sched[r].peers[0].bytes; }

  InMemoryRendezvous rdv_;
  TcpStats stats_;
  std::unique_ptr<World> world_;
  std::unique_ptr<Transport> sender_;
  std::vector<std::unique_ptr<Transport>> receivers_;
  std::vector<std::unique_ptr<VersionedShard>> shards_;
};

TEST_P(TcpDeltaTest, ASmallStepGoesAsDeltasAndAChangeEverywhereRaw) {
  const auto v1 = world_->Weights(1);
  EXPECT_EQ(Sync(1, v1)[0], 0) << "nothing to send a delta against yet";
  const auto v2 = SmallStep(v1, 64);
  const std::array<int64_t, 4> step = Sync(2, v2);
  EXPECT_EQ(step[0], Payload(0) + Payload(1)) << "every byte went as delta frames";
  EXPECT_LT(step[1] * 4, step[0]) << "a small step takes under a quarter of its bytes: " << step[1];
  EXPECT_GT(step[2], 0);
  EXPECT_EQ(step[3], 0);
  const auto v3 = world_->Weights(3);  // every byte changed: deltas do not pay
  const std::array<int64_t, 4> all = Sync(3, v3);
  EXPECT_EQ(all[1], all[0]) << "raw frames, byte for byte";
  EXPECT_EQ(all[2], 0);
  EXPECT_GT(all[3], 0);
  EXPECT_EQ(Sync(4, SmallStep(v3, 16))[3], 0) << "deltas again against the raw version";
}

TEST_P(TcpDeltaTest, AReceiverHoldingAnotherVersionGetsEveryByte) {
  const auto v1 = world_->Weights(1);
  Sync(1, v1);
  const auto v2 = SmallStep(v1, 64);
  Sync(2, v2);
  // Receiver 1 is replaced by one that holds version 1 (restarted from a checkpoint).
  shards_[1] = std::make_unique<VersionedShard>(world_->rlayout[1].Bytes());
  ASSERT_TRUE(shards_[1]->Load(1, world_->Expected(1, v1)).ok());
  const std::array<int64_t, 4> step = Sync(3, SmallStep(v2, 64));
  EXPECT_EQ(step[0], Payload(0)) << "deltas to receiver 0 only";
  // A receiver that holds none (fresh) takes every byte too.
  shards_[0] = std::make_unique<VersionedShard>(world_->rlayout[0].Bytes());
  EXPECT_EQ(Sync(4, SmallStep(v2, 32))[0], Payload(1)) << "deltas to receiver 1 only";
}

// The sender's base serves only the streams it was cut for: to receivers of another
// schedule (other layouts) that hold the base's version number, every byte.
TEST_P(TcpDeltaTest, AnotherScheduleGetsEveryByte) {
  Sync(1, world_->Weights(1));
  auto other =
      MakeWorld(OneMatrix(256, 256), Layout::Of(ModelParallel{}), Layout::Engines(1, ModelParallel{.tp = 2}));
  ASSERT_TRUE(other.ok()) << other.status();
  TcpOptions o;
  o.rendezvous = &rdv_;  // (they take over ranks 0 and 1's addresses)
  o.delta = true;
  o.same_host_direct_write = false;
  std::vector<std::unique_ptr<Transport>> receivers;
  std::vector<std::unique_ptr<VersionedShard>> shards;
  ASSERT_NO_FATAL_FAILURE(MakeReceivers(**other, o, receivers, shards));
  const auto v1 = (*other)->Weights(1), v2 = SmallStep(v1, 64);
  for (int r = 0; r < (*other)->plan.num_receivers; ++r)
    ASSERT_TRUE(shards[r]->Load(1, (*other)->Expected(r, v1)).ok());
  std::vector<absl::Status> got(receivers.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < receivers.size(); ++r)
    threads.emplace_back([&, r] { got[r] = receivers[r]->Receive(2, (*other)->recv_sched[r], *shards[r]); });
  const int64_t before = stats_.delta_bytes.load();
  std::vector<uint8_t> shard = (*other)->SenderShard(0, v2);
  absl::Status sent = sender_->Send(2, (*other)->send_sched[0], absl::MakeConstSpan(shard));
  for (auto& t : threads) t.join();
  ASSERT_TRUE(sent.ok()) << sent;
  EXPECT_EQ(stats_.delta_bytes.load(), before) << "no deltas against a base cut for other streams";
  for (size_t r = 0; r < receivers.size(); ++r) {
    ASSERT_TRUE(got[r].ok()) << got[r];
    EXPECT_TRUE(*shards[r]->Current().bytes == (*other)->Expected(r, v2)) << "receiver " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Staging, TcpDeltaTest, ::testing::Values(Staging::kCopy, Staging::kInPlace),
                         [](const ::testing::TestParamInfo<Staging>& i) {
                           return i.param == Staging::kCopy ? "copy" : "in_place";
                         });

// A receiver applies a delta only to the version it said it holds, and commits nothing whose
// checksum (of the result) fails: a hand-written sender lies in each way.
class TcpDeltaPeerTest : public TcpPeerTest {
 protected:
  void Configure(TcpOptions& o) override {
    o.delta = true;
    o.same_host_unix_socket = false;
  }
  void Prepare(VersionedShard& shard) override {
    ASSERT_TRUE(shard.Load(1, std::vector<uint8_t>(Bytes(), 5)).ok());
  }
  uint64_t Version() const override { return 2; }
  // Connects, says hello for `version` offering deltas, and reads the welcome and the
  // version held.
  tcp::socket Hello(uint64_t* held, uint64_t version = 2) {
    tcp::socket s = Connect();
    asio::write(s, asio::buffer(HelloBytes(version, 0, 0, Bytes(), Bytes(), /*delta=*/4)));
    EXPECT_EQ(ReadStatusCode(s), 0u);
    asio::read(s, asio::buffer(held, 8));
    return s;
  }
  // A delta bucket of every byte against `base`: its header and one frame of `kind` with
  // `frame_sum` (the checksum of its result).
  void SendDeltaBucket(tcp::socket& s, uint64_t base, uint32_t kind, const std::vector<uint8_t>& payload,
                       uint64_t n, uint64_t frame_sum = 0) {
    std::vector<uint8_t> h = BucketHeader(0, Bytes(), 0);
    const uint32_t delta = 2;
    std::memcpy(&h[4], &delta, 4);
    h.resize(32);
    std::memcpy(&h[24], &base, 8);
    std::vector<uint8_t> f(32, 0);
    const uint64_t wire = kind == 0 ? 0 : payload.size();
    std::memcpy(&f[0], &kind, 4);
    std::memcpy(&f[8], &n, 8);
    std::memcpy(&f[16], &wire, 8);
    std::memcpy(&f[24], &frame_sum, 8);
    // (The receiver may refuse and hang up before it all arrives: a failed write is expected.)
    boost::system::error_code ec;
    asio::write(s, asio::buffer(h), ec);
    asio::write(s, asio::buffer(f), ec);
    asio::write(s, asio::buffer(payload), ec);
  }
  // The sync fails with DATA_LOSS saying `why`, and version 1 stays live.
  void ExpectDataLoss(const std::string& why) {
    absl::Status st = Finish();
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr(why));
    EXPECT_EQ(shard_->Current().version, 1u);
  }
};

TEST_F(TcpDeltaPeerTest, ADeltaAgainstAnotherVersionIsDataLoss) {
  uint64_t held = 0;
  tcp::socket s = Hello(&held);
  EXPECT_EQ(held, 1u);
  SendDeltaBucket(s, /*base=*/7, /*raw=*/0, std::vector<uint8_t>(Bytes(), 9), Bytes());
  ExpectDataLoss("a delta against version 7, but this receiver holds version 1");
  EXPECT_TRUE(*shard_->Current().bytes == std::vector<uint8_t>(Bytes(), 5));
}

TEST_F(TcpDeltaPeerTest, AResultWhoseChecksumFailsIsNotCommittedEvenWithChecksumsOff) {
  uint64_t held = 0;
  tcp::socket s = Hello(&held);
  // A well-formed delta (a few 9s over the base's 5s) whose checksum is of other bytes: what
  // a base other than the sender's gives.
  std::vector<uint8_t> want(Bytes(), 5), x(Bytes());
  for (size_t i = 0; i < want.size(); i += 50) want[i] = 9;
  XorBytes(x.data(), want.data(), std::vector<uint8_t>(Bytes(), 5).data(), x.size());
  DeltaEncoder encoder;
  std::optional<absl::Span<const uint8_t>> frame = encoder.Compress(x.data(), x.size(), x.size());
  ASSERT_TRUE(frame.has_value());
  want[100] ^= 1;
  Checksum sum;
  sum.Update(want.data(), want.size());
  SendDeltaBucket(s, 1, /*xor=*/1, std::vector<uint8_t>(frame->begin(), frame->end()), Bytes(), sum.Digest());
  ExpectDataLoss("checksum mismatch");
  // Its bytes are not the sender's version 1: it takes no more deltas against them.
  receive_ = std::thread([this] { result_ = receiver_->Receive(3, world_->recv_sched[0], *shard_); });
  uint64_t again = 1;
  tcp::socket s3 = Hello(&again, 3);
  EXPECT_EQ(again, 0u);
}

TEST_F(TcpDeltaPeerTest, ACorruptCompressedFrameIsDataLoss) {
  uint64_t held = 0;
  tcp::socket s = Hello(&held);
  SendDeltaBucket(s, 1, /*xor=*/1, std::vector<uint8_t>(64, 0xEE), Bytes());
  ExpectDataLoss("delta frame");
}

TEST_F(TcpDeltaPeerTest, AFrameLongerThanItsBucketIsDataLoss) {
  uint64_t held = 0;
  tcp::socket s = Hello(&held);
  SendDeltaBucket(s, 1, /*raw=*/0, {}, Bytes() + 1);
  ExpectDataLoss("a delta frame of");
}

TEST(TcpOptionsTest, BadOptionsNameTheField) {
  InMemoryRendezvous rdv;
  TcpOptions o;
  EXPECT_THAT(std::string(CreateTcpTransport(o).status().message()), HasSubstr("rendezvous"));
  o.rendezvous = &rdv;
  o.transfer.bucket_bytes = 0;
  EXPECT_THAT(std::string(CreateTcpTransport(o).status().message()), HasSubstr("transfer.bucket_bytes"));
  o.transfer.bucket_bytes = 1;
  for (int64_t bad : {int64_t{-1}, int64_t{1000}, (int64_t{1} << 30) + 1}) {
    o.lockstep_window_bytes = bad;
    EXPECT_THAT(std::string(CreateTcpTransport(o).status().message()), HasSubstr("lockstep_window_bytes"))
        << bad;
  }
  o.lockstep_window_bytes = 0;
  EXPECT_TRUE(CreateTcpTransport(o).ok()) << "0 turns lockstep off";
  o.lockstep_window_bytes = int64_t{2} << 20;
  o.transfer.bucket_bytes = 1;
  o.receiver_rank = 0;
  o.bind_host = "not-an-ip";
  EXPECT_THAT(std::string(CreateTcpTransport(o).status().message()), HasSubstr("bind_host"));
  o.bind_host = "0.0.0.0";
  EXPECT_THAT(std::string(CreateTcpTransport(o).status().message()), HasSubstr("advertise_host"));
  o.advertise_host = "127.0.0.1";
  ASSERT_TRUE(CreateTcpTransport(o).ok());
  EXPECT_THAT(*rdv.Get("weight_sync/receiver/0", absl::Seconds(1)), ::testing::StartsWith("127.0.0.1:"));
}

// ---- across processes ----

// How ranks in different processes meet: on the receivers' Unix sockets with senders writing
// into the receivers' buffers (the default on one host), on them with the bytes streaming through, or
// over loopback TCP.
enum class Path { kDirect, kUnixStream, kTcp };
const char* Name(Path p) {
  return p == Path::kDirect ? " (direct)" : p == Path::kUnixStream ? " (unix)" : " (tcp)";
}

// One rank's life in a child process; returns the exit code (0: as expected).
int RunRank(const World& w, const std::string& dir, bool sender, int rank, bool expect_failure,
            Path path = Path::kDirect) {
  FileRendezvous rdv(dir);
  TcpStats stats;
  TcpOptions o;
  o.rendezvous = &rdv;
  o.stats = &stats;
  o.same_host_unix_socket = path != Path::kTcp;
  o.same_host_direct_write = path == Path::kDirect;
  o.receiver_rank = sender ? -1 : rank;
  o.transfer.bucket_bytes = 64 << 10;
  o.transfer.checksums = true;
  o.transfer.io_timeout = absl::Seconds(expect_failure ? 1 : 20);
  auto t = CreateTcpTransport(o);
  if (!t.ok()) return 10;
  auto weights = w.Weights(1);
  if (sender) {
    auto shard = w.SenderShard(rank, weights);
    absl::Status s = (*t)->Send(1, w.send_sched[rank], absl::MakeConstSpan(shard));
    if (!s.ok()) std::fprintf(stderr, "sender %d: %s\n", rank, s.ToString().c_str());
    if (s.ok() != !expect_failure) return 11;
    // The payload went the way asked: all read from our memory, or none.
    int64_t payload = 0;
    for (const PeerStream& p : w.send_sched[rank].peers) payload += p.bytes;
    if (!expect_failure && stats.direct_write_bytes.load() != (path == Path::kDirect ? payload : 0))
      return 16;
    return 0;
  }
  VersionedShard shard(w.rlayout[rank].Bytes());
  absl::Status s = (*t)->Receive(1, w.recv_sched[rank], shard);
  if (expect_failure) {
    if (s.ok()) return 12;
    std::fprintf(stderr, "receiver %d failed as expected: %s\n", rank, s.ToString().c_str());
    return shard.Current().version == 0 ? 0 : 13;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "receiver %d: %s\n", rank, s.ToString().c_str());
    return 14;
  }
  return *shard.Current().bytes == w.Expected(rank, weights) ? 0 : 15;
}

class CrossProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/ws_rdv_", getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  pid_t Spawn(const World& w, bool sender, int rank, bool expect_failure, Path path = Path::kDirect) {
    pid_t pid = fork();
    if (pid == 0) _exit(RunRank(w, dir_, sender, rank, expect_failure, path));
    return pid;
  }
  // Every rank of `w` in its own process over `path`; each must exit 0 (see RunRank).
  void RunEveryRank(const World& w, Path path, const std::string& where) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    std::vector<std::pair<std::string, pid_t>> kids;
    for (int r = 0; r < w.plan.num_receivers; ++r)
      kids.push_back({absl::StrCat("receiver ", r), Spawn(w, false, r, false, path)});
    for (int s = 0; s < w.plan.num_senders; ++s)
      kids.push_back({absl::StrCat("sender ", s), Spawn(w, true, s, false, path)});
    for (auto& [name, pid] : kids) EXPECT_EQ(ExitCode(pid), 0) << where << ": " << name;
  }
  static int ExitCode(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
  }
  std::string dir_;
};

// A slice of the correctness matrix with one process per rank: dense TP x PP, MoE with EP and
// FSDP trainers, to engines of different TP; over each of the three paths (see Path).
TEST_F(CrossProcessTest, EveryRankInItsOwnProcess) {
  struct Case {
    std::string name;
    TransformerConfig model;
    Layout trainer, engines;
  };
  std::vector<Case> cases = {
      {"dense TP2xPP2 -> 2 x TP2", SmallDense(), Layout::Of(ModelParallel{.tp = 2, .pp = 2}),
       Layout::Engines(2, ModelParallel{.tp = 2})},
      {"MoE TP2xEP2 -> TP1 + TP4/EP", SmallMoe(), Layout::Of(ModelParallel{.tp = 2, .ep = 2}),
       Layout{
           {ModelParallel{.tp = 1}, ModelParallel{.tp = 4, .experts = ExpertSharding::kWholeOverAllRanks}}}},
      {"FSDP 3x2 -> 3 x TP1", SmallDense(), Layout::Of(Fsdp{.shards = 3, .replicas = 2}),
       Layout::Engines(3, ModelParallel{.tp = 1})},
  };
  for (const Path path : {Path::kDirect, Path::kUnixStream, Path::kTcp})
    for (const Case& c : cases) {
      auto w = MakeWorld(MakeTransformer(c.model), c.trainer, c.engines);
      ASSERT_TRUE(w.ok()) << c.name << ": " << w.status();
      RunEveryRank(**w, path, c.name + Name(path));
    }
}

// The issue's whole correctness matrix with one process per rank, on the default path between
// processes of one host (Unix sockets, direct writes); every receiver's shard equals, byte for
// byte, its slice of the model (RunRank checks, with checksums on, and that every payload byte
// was written directly).
TEST_F(CrossProcessTest, TheIssuesMatrixWithEveryRankInItsOwnProcess) {
  int syncs = 0;
  for (const MatrixTrainer& t : MatrixTrainers())
    ForEachMatrixEngines(t, [&](Layout engines, std::string where) {
      if (::testing::Test::HasFatalFailure()) return;
      auto w = MakeWorld(MakeTransformer(t.moe ? SmallMoe() : SmallDense()), t.layout, std::move(engines));
      ASSERT_TRUE(w.ok()) << where << ": " << w.status();
      RunEveryRank(**w, Path::kDirect, where);
      ++syncs;
    });
  EXPECT_EQ(syncs, 72);
}

TEST_F(CrossProcessTest, AKilledSenderProcessFailsTheReceiversWhoKeepTheirVersion) {
  auto w = MakeWorld(OneMatrix(2048, 2048), Layout::Of(ModelParallel{.tp = 2}),
                     Layout::Engines(1, ModelParallel{.tp = 1}));
  ASSERT_TRUE(w.ok());
  pid_t receiver = Spawn(**w, false, 0, /*expect_failure=*/true);
  pid_t healthy = Spawn(**w, true, 1, /*expect_failure=*/true);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t doomed = fork();
  if (doomed == 0) {
    // Sender 0 connects, sends half its bytes, says so, and waits to be killed.
    FileRendezvous rdv(dir_);
    auto where = rdv.Get("weight_sync/receiver/0", absl::Seconds(10));
    if (!where.ok()) _exit(20);
    asio::io_context io;
    tcp::socket s(io);
    s.connect(tcp::endpoint(asio::ip::make_address(where->substr(0, where->find(':'))),
                            std::atoi(where->substr(where->find(':') + 1).c_str())));
    const int64_t bytes = (*w)->send_sched[0].peers[0].bytes;
    asio::write(s, asio::buffer(HelloBytes(1, 0, 0, bytes, 64 << 10, 1)));
    if (ReadStatusCode(s) != 0) _exit(21);
    std::vector<uint8_t> half(32 << 10);
    asio::write(s, asio::buffer(BucketHeader(0, 64 << 10, 0)));
    asio::write(s, asio::buffer(half));
    if (write(ready[1], "x", 1) != 1) _exit(22);
    pause();
    _exit(23);
  }
  close(ready[1]);  // so that a child that exits early ends the read below
  char x;
  ASSERT_EQ(read(ready[0], &x, 1), 1) << "the doomed sender exited with " << ExitCode(doomed);
  kill(doomed, SIGKILL);
  EXPECT_EQ(ExitCode(doomed), 100 + SIGKILL);
  EXPECT_EQ(ExitCode(receiver), 0) << "the receiver must fail and keep version 0";
  EXPECT_EQ(ExitCode(healthy), 0) << "the healthy sender must learn the sync failed";
}

}  // namespace
}  // namespace skyrl::weight_sync
