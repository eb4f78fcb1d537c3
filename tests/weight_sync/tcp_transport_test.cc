// TCP-specific behaviour: the wire protocol against hand-written peers that die, stall or lie,
// and whole syncs across processes (a file rendezvous, one process per rank).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <utility>  // before Boost 1.74's asio, whose awaitable.hpp needs std::exchange in C++20

#include <boost/asio.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/weight_sync/sync_harness.h"
#include "weight_sync/checksum.h"
#include "weight_sync/plan/model_zoo.h"
#include "weight_sync/rendezvous.h"
#include "weight_sync/tcp/listener.h"  // HostIdentity
#include "weight_sync/tcp/tcp_transport.h"

namespace skyrl::weight_sync {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using testing::MakeWorld;
using testing::World;

// The wire format, written out independently of the implementation (it is a contract).
std::vector<uint8_t> HelloBytes(uint64_t version, uint32_t sender, uint32_t receiver, uint64_t bytes,
                                uint64_t bucket, uint32_t flags) {
  std::vector<uint8_t> b(48, 0);
  auto put32 = [&](size_t at, uint32_t v) { std::memcpy(&b[at], &v, 4); };
  auto put64 = [&](size_t at, uint64_t v) { std::memcpy(&b[at], &v, 8); };
  put32(0, 0x53574B53);
  put32(4, 2);  // protocol
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
// The offer that follows a hello with flag 2 (direct reads): the probe's address and value.
std::vector<uint8_t> DirectOffer(const void* probe_at, uint64_t probe) {
  std::vector<uint8_t> b(16, 0);
  const uint64_t at = reinterpret_cast<uint64_t>(probe_at);
  std::memcpy(&b[0], &at, 8);
  std::memcpy(&b[8], &probe, 8);
  return b;
}
// A direct-read bucket: the header (with the range count) and the range table.
std::vector<uint8_t> DirectBucket(uint32_t index, uint64_t len, uint64_t checksum,
                                  const std::vector<std::pair<const void*, uint64_t>>& ranges) {
  std::vector<uint8_t> b = BucketHeader(index, len, checksum);
  const uint32_t count = ranges.size();
  std::memcpy(&b[4], &count, 4);
  for (const auto& [at, n] : ranges) {
    const uint64_t addr = reinterpret_cast<uint64_t>(at);
    b.resize(b.size() + 16);
    std::memcpy(&b[b.size() - 16], &addr, 8);
    std::memcpy(&b[b.size() - 8], &n, 8);
  }
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
    auto t = CreateTcpTransport(o);
    ASSERT_TRUE(t.ok()) << t.status();
    receiver_ = std::move(*t);
    shard_ = std::make_unique<VersionedShard>(world_->rlayout[0].Bytes());
    receive_ = std::thread([this] { result_ = receiver_->Receive(1, world_->recv_sched[0], *shard_); });
  }
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

// ---- direct reads (the sender's memory is this process's) ----

TEST_F(TcpPeerTest, ADirectReadOfferIsTakenUpAndTheBytesReadFromTheSendersRanges) {
  if (tcp_internal::HostIdentity().empty()) GTEST_SKIP() << "no boot id or network namespace in /proc: no same-host path";
  auto s = ConnectLocal();
  const uint64_t probe = 0x5eed5eed12345679;
  asio::write(s, asio::buffer(HelloBytes(1, 0, 0, Bytes(), Bytes(), /*direct=*/2)));
  asio::write(s, asio::buffer(DirectOffer(&probe, probe)));
  std::string answer;
  ASSERT_EQ(ReadStatusCode(s, &answer), 0u);
  EXPECT_EQ(answer, "direct-read");
  // The bucket's bytes in two ranges that are not adjacent in our memory.
  std::vector<uint8_t> head(Bytes() / 3), tail(Bytes() - Bytes() / 3);
  for (size_t i = 0; i < head.size(); ++i) head[i] = static_cast<uint8_t>(i * 7);
  for (size_t i = 0; i < tail.size(); ++i) tail[i] = static_cast<uint8_t>(i * 13 + 1);
  asio::write(s, asio::buffer(DirectBucket(0, Bytes(), 0, {{head.data(), head.size()}, {tail.data(), tail.size()}})));
  EXPECT_EQ(ReadStatusCode(s), 0u);  // final confirmation: the receiver has read them
  ASSERT_TRUE(Finish().ok()) << result_;
  std::vector<uint8_t> want = head;
  want.insert(want.end(), tail.begin(), tail.end());
  EXPECT_TRUE(*shard_->Current().bytes == want);
}

TEST_F(TcpPeerTest, AnOfferWhoseProbeDoesNotMatchIsDeclinedAndTheBytesStream) {
  if (tcp_internal::HostIdentity().empty()) GTEST_SKIP() << "no boot id or network namespace in /proc: no same-host path";
  auto s = ConnectLocal();
  const uint64_t probe = 0x5eed5eed12345679;
  asio::write(s, asio::buffer(HelloBytes(1, 0, 0, Bytes(), Bytes(), 2)));
  asio::write(s, asio::buffer(DirectOffer(&probe, probe + 2)));
  std::string answer = "unset";
  ASSERT_EQ(ReadStatusCode(s, &answer), 0u);
  EXPECT_EQ(answer, "");
  std::vector<uint8_t> data(Bytes(), 4);
  asio::write(s, asio::buffer(BucketHeader(0, Bytes(), 0)));
  asio::write(s, asio::buffer(data));
  EXPECT_EQ(ReadStatusCode(s), 0u);
  ASSERT_TRUE(Finish().ok()) << result_;
  EXPECT_TRUE(*shard_->Current().bytes == data);
}

TEST_F(TcpPeerTest, AnOfferOverTcpIsDeclined) {
  tcp::socket s = Connect();
  const uint64_t probe = 0x5eed5eed12345679;
  asio::write(s, asio::buffer(HelloBytes(1, 0, 0, Bytes(), Bytes(), 2)));
  asio::write(s, asio::buffer(DirectOffer(&probe, probe)));
  std::string answer = "unset";
  ASSERT_EQ(ReadStatusCode(s, &answer), 0u);
  EXPECT_EQ(answer, "") << "over TCP the kernel cannot say which process is at the other end";
  std::vector<uint8_t> data(Bytes(), 3);
  asio::write(s, asio::buffer(BucketHeader(0, Bytes(), 0)));
  asio::write(s, asio::buffer(data));
  EXPECT_EQ(ReadStatusCode(s), 0u);
  ASSERT_TRUE(Finish().ok()) << result_;
}

// A table the receiver cannot use fails the sync with DataLoss; the live version stays.
class TcpDirectTableTest : public TcpPeerTest, public ::testing::WithParamInterface<int> {};

TEST_P(TcpDirectTableTest, ABadRangeTableIsDataLossAndKeepsTheVersion) {
  if (tcp_internal::HostIdentity().empty()) GTEST_SKIP() << "no boot id or network namespace in /proc: no same-host path";
  auto s = ConnectLocal();
  const uint64_t probe = 0x5eed5eed12345679;
  asio::write(s, asio::buffer(HelloBytes(1, 0, 0, Bytes(), Bytes(), 2)));
  asio::write(s, asio::buffer(DirectOffer(&probe, probe)));
  std::string answer;
  ASSERT_EQ(ReadStatusCode(s, &answer), 0u);
  ASSERT_EQ(answer, "direct-read");
  std::vector<uint8_t> data(Bytes(), 8);
  std::string expect;
  switch (GetParam()) {
    case 0:  // one byte short
      asio::write(s, asio::buffer(DirectBucket(0, Bytes(), 0, {{data.data(), Bytes() - 1}})));
      expect = "adds up to";
      break;
    case 1:  // one byte too many
      asio::write(s, asio::buffer(DirectBucket(0, Bytes(), 0, {{data.data(), Bytes()}, {data.data(), 1}})));
      expect = "does not add up";
      break;
    default:  // memory the sender does not have (page 0)
      asio::write(s, asio::buffer(DirectBucket(0, Bytes(), 0, {{reinterpret_cast<const void*>(64), Bytes()}})));
      expect = "reading sender process";
      break;
  }
  EXPECT_EQ(ReadStatusCode(s), static_cast<uint32_t>(absl::StatusCode::kDataLoss));
  absl::Status st = Finish();
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr(expect));
  EXPECT_EQ(shard_->Current().version, 0u);
  EXPECT_EQ(shard_->PendingVersion(), 0u);
}

std::string TableName(const ::testing::TestParamInfo<int>& i) {
  static const char* const kNames[] = {"short", "long", "unmapped"};
  return kNames[i.param];
}
INSTANTIATE_TEST_SUITE_P(Tables, TcpDirectTableTest, ::testing::Values(0, 1, 2), TableName);

// Over both sender paths: with zero-copy sends the kernel raises SIGPIPE on a closed peer,
// which must fail the sync, not kill the process.
class TcpSenderTest : public ::testing::TestWithParam<bool> {};

TEST_P(TcpSenderTest, ReceiverDyingMidStreamFailsTheSenderNamingIt) {
  auto w = MakeWorld(OneMatrix(4096, 4096), Layout::Of(ModelParallel{}), Layout::Engines(1, ModelParallel{}));
  ASSERT_TRUE(w.ok());
  InMemoryRendezvous rdv;
  asio::io_context io;
  tcp::acceptor acc(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  ASSERT_TRUE(rdv.Put("weight_sync/receiver/0", absl::StrCat("127.0.0.1:", acc.local_endpoint().port())).ok());
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
  auto w = MakeWorld(MakeTransformer(c), Layout::Of(ModelParallel{.tp = 1}), Layout::Engines(2, ModelParallel{.tp = 2}));
  ASSERT_TRUE(w.ok()) << w.status();
  InMemoryRendezvous rdv;
  TcpStats stats;
  TcpOptions o;
  o.rendezvous = &rdv;
  o.zero_copy_send = GetParam();
  o.same_host_direct_read = false;  // the payload goes through the sockets, spliced or copied
  o.stats = &stats;
  o.transfer.chunk_bytes = 10000;
  o.transfer.bucket_bytes = 50000;
  o.transfer.checksums = true;
  auto sender = CreateTcpTransport(o);
  ASSERT_TRUE(sender.ok());
  std::vector<std::unique_ptr<Transport>> receivers;
  std::vector<std::unique_ptr<VersionedShard>> shards;
  for (int r = 0; r < (*w)->plan.num_receivers; ++r) {
    TcpOptions ro = o;
    ro.receiver_rank = r;
    ro.stats = nullptr;
    auto t = CreateTcpTransport(ro);
    ASSERT_TRUE(t.ok()) << t.status();
    receivers.push_back(std::move(*t));
    shards.push_back(std::make_unique<VersionedShard>((*w)->rlayout[r].Bytes()));
  }
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
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "zero_copy" : "copy"; });

// ---- the same-host path ----

// One receiver (default options, so it offers its Unix socket) and one sender whose
// rendezvous answer the test controls; returns the sender's stats after one sync.
struct SameHostRun {
  absl::Status sent, received;
  int64_t local = 0, tcp = 0;
  int64_t payload = 0, direct = 0, spliced = 0;  // bytes: all, read directly, spliced
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
  ro.same_host_direct_read = receiver_direct;
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
  so.same_host_direct_read = sender_direct;
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
  out.direct = stats.direct_read_bytes.load();
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
  if (tcp_internal::HostIdentity().empty()) GTEST_SKIP() << "no boot id or network namespace in /proc: no same-host path";
  std::string published;
  SameHostRun r = SyncThrough(true, [&](std::string where) {
    published = where;
    return where;
  });
  EXPECT_THAT(published, ::testing::MatchesRegex("127\\.0\\.0\\.1:[0-9]+ local=skyrl-weight-sync-[0-9]+-[0-9a-f]{16} host=.+/[0-9]+"));
  ExpectDeliveredOver(r, /*local=*/1, /*tcp=*/0);
  EXPECT_EQ(r.direct, r.payload) << "the receiver reads every byte from the sender's memory";
  EXPECT_EQ(r.spliced, 0);
}

TEST(TcpSameHostTest, WithoutDirectReadsOnEitherSideTheBytesStreamThroughTheUnixSocket) {
  if (tcp_internal::HostIdentity().empty()) GTEST_SKIP() << "no boot id or network namespace in /proc: no same-host path";
  for (const bool sender_allows : {false, true}) {
    SCOPED_TRACE(sender_allows ? "the receiver declines" : "the sender does not offer");
    SameHostRun r = SyncThrough(true, [](std::string where) { return where; }, sender_allows, !sender_allows);
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
  EXPECT_THAT(*rdv.Get("weight_sync/receiver/3", absl::Seconds(1)), ::testing::MatchesRegex("127\\.0\\.0\\.1:[0-9]+"));
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
    EXPECT_THAT(std::string(CreateTcpTransport(o).status().message()), HasSubstr("lockstep_window_bytes")) << bad;
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

// How ranks in different processes meet: on the receivers' Unix sockets with receivers reading
// the senders' memory (the default on one host), on them with the bytes streaming through, or
// over loopback TCP.
enum class Path { kDirect, kUnixStream, kTcp };
const char* Name(Path p) { return p == Path::kDirect ? " (direct)" : p == Path::kUnixStream ? " (unix)" : " (tcp)"; }

// One rank's life in a child process; returns the exit code (0: as expected).
int RunRank(const World& w, const std::string& dir, bool sender, int rank, bool expect_failure,
            Path path = Path::kDirect) {
  FileRendezvous rdv(dir);
  TcpStats stats;
  TcpOptions o;
  o.rendezvous = &rdv;
  o.stats = &stats;
  o.same_host_unix_socket = path != Path::kTcp;
  o.same_host_direct_read = path == Path::kDirect;
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
    if (!expect_failure && stats.direct_read_bytes.load() != (path == Path::kDirect ? payload : 0)) return 16;
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
  TransformerConfig dense;
  dense.layers = 4;
  dense.hidden = 64;
  dense.intermediate = 128;
  dense.heads = 4;
  dense.kv_heads = 4;
  dense.head_dim = 16;
  dense.vocab = 128;
  TransformerConfig moe = dense;
  moe.experts = 8;
  moe.moe_intermediate = 32;
  struct Case {
    std::string name;
    TransformerConfig model;
    Layout trainer, engines;
  };
  std::vector<Case> cases = {
      {"dense TP2xPP2 -> 2 x TP2", dense, Layout::Of(ModelParallel{.tp = 2, .pp = 2}),
       Layout::Engines(2, ModelParallel{.tp = 2})},
      {"MoE TP2xEP2 -> TP1 + TP4/EP", moe, Layout::Of(ModelParallel{.tp = 2, .ep = 2}),
       Layout{{ModelParallel{.tp = 1}, ModelParallel{.tp = 4, .experts = ExpertSharding::kWholeOverAllRanks}}}},
      {"FSDP 3x2 -> 3 x TP1", dense, Layout::Of(Fsdp{.shards = 3, .replicas = 2}),
       Layout::Engines(3, ModelParallel{.tp = 1})},
  };
  for (const Path path : {Path::kDirect, Path::kUnixStream, Path::kTcp})
    for (const Case& c : cases) {
      auto w = MakeWorld(MakeTransformer(c.model), c.trainer, c.engines);
      ASSERT_TRUE(w.ok()) << c.name << ": " << w.status();
      std::filesystem::remove_all(dir_);
      std::filesystem::create_directories(dir_);
      std::vector<std::pair<std::string, pid_t>> kids;
      for (int r = 0; r < (*w)->plan.num_receivers; ++r)
        kids.push_back({absl::StrCat("receiver ", r), Spawn(**w, false, r, false, path)});
      for (int s = 0; s < (*w)->plan.num_senders; ++s)
        kids.push_back({absl::StrCat("sender ", s), Spawn(**w, true, s, false, path)});
      for (auto& [name, pid] : kids)
        EXPECT_EQ(ExitCode(pid), 0) << c.name << Name(path) << ": " << name;
    }
}

TEST_F(CrossProcessTest, AKilledSenderProcessFailsTheReceiversWhoKeepTheirVersion) {
  auto w = MakeWorld(OneMatrix(2048, 2048), Layout::Of(ModelParallel{.tp = 2}), Layout::Engines(1, ModelParallel{.tp = 1}));
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
