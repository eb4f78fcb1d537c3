// SpliceWriter (weight_sync/tcp/splice_writer.h): zero-copy writes over a real loopback socket,
// with the kernel's answers cut short or refused through injected system calls.
#include "weight_sync/tcp/splice_writer.h"

#include <atomic>
#include <numeric>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace skyrl::weight_sync::tcp_internal {
namespace {

// A connected pair: `writer` is a Connection (what the transport writes through), `reader`
// a plain socket on its own io_context.
class SplicePair : public ::testing::Test {
 protected:
  void SetUp() override {
    BlockSigpipeInThisThread();
    tcp::acceptor acc(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    std::thread t([&] { acc.accept(reader_); });
    ASSERT_FALSE(writer_.Connect(acc.local_endpoint(), absl::Seconds(5)));
    t.join();
  }
  // Reads `n` bytes on a thread; Join() returns them.
  void StartReading(size_t n) {
    got_.assign(n, 0);
    reading_ = std::thread([this] {
      error_code ec;
      asio::read(reader_, asio::buffer(got_), ec);
      read_error_ = ec;
    });
  }
  std::vector<uint8_t> Join() {
    reading_.join();
    EXPECT_FALSE(read_error_) << read_error_.message();
    return got_;
  }
  void TearDown() override {
    if (reading_.joinable()) reading_.join();
  }

  asio::io_context io_;
  tcp::socket reader_{io_};
  Connection writer_;
  std::vector<uint8_t> got_;
  error_code read_error_;
  std::thread reading_;
};

std::vector<uint8_t> Pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
  return v;
}

// Cuts `src` into unaligned pieces (1 byte to ~70 KiB), some empty, in a shuffled order of
// sizes; returns the buffers and the bytes they describe, concatenated.
std::vector<asio::const_buffer> Pieces(const std::vector<uint8_t>& src, std::vector<uint8_t>* expected) {
  std::vector<asio::const_buffer> out;
  size_t at = 0, k = 0;
  while (at < src.size()) {
    const size_t sizes[] = {1, 0, 4095, 70001, 3, 65536, 12345};
    const size_t n = std::min(sizes[k++ % 7], src.size() - at);
    out.emplace_back(src.data() + at, n);
    expected->insert(expected->end(), src.begin() + at, src.begin() + at + n);
    at += n;
  }
  return out;
}

TEST_F(SplicePair, WritesManyUnalignedBuffersInOrderWithoutCopying) {
  std::vector<uint8_t> src = Pattern(24 << 20), want;
  auto bufs = Pieces(src, &want);
  StartReading(want.size());
  SpliceWriter w;
  ASSERT_FALSE(w.Write(writer_, bufs, absl::Seconds(10)));
  EXPECT_TRUE(Join() == want);
  EXPECT_TRUE(w.zero_copy());
  EXPECT_EQ(w.spliced_bytes(), static_cast<int64_t>(want.size()));
  EXPECT_EQ(w.copied_bytes(), 0);
  EXPECT_GE(w.pipe_bytes(), 64 << 10);
}

TEST_F(SplicePair, ShortSystemCallsStillDeliverEveryByte) {
  SpliceCalls calls;
  calls.vmsplice = [](int fd, const iovec* iov, size_t n, unsigned flags) {
    iovec one = iov[0];
    one.iov_len = std::min<size_t>(one.iov_len, 777);  // one short piece at a time
    return ::vmsplice(fd, &one, 1, flags);
  };
  calls.splice = [](int in, int out, size_t len, unsigned flags) {
    return ::splice(in, nullptr, out, nullptr, std::min<size_t>(len, 1000), flags);
  };
  std::vector<uint8_t> src = Pattern(3 << 20), want;
  auto bufs = Pieces(src, &want);
  StartReading(want.size());
  SpliceWriter w(calls);
  ASSERT_FALSE(w.Write(writer_, bufs, absl::Seconds(10)));
  EXPECT_TRUE(Join() == want);
  EXPECT_EQ(w.spliced_bytes(), static_cast<int64_t>(want.size()));
}

TEST_F(SplicePair, RefusedVmspliceFallsBackToCopying) {
  SpliceCalls calls;
  calls.vmsplice = [](int, const iovec*, size_t, unsigned) -> ssize_t {
    errno = EINVAL;
    return -1;
  };
  std::vector<uint8_t> src = Pattern(2 << 20), want;
  auto bufs = Pieces(src, &want);
  StartReading(want.size() * 2);
  SpliceWriter w(calls);
  ASSERT_FALSE(w.Write(writer_, bufs, absl::Seconds(10)));
  EXPECT_FALSE(w.zero_copy());
  ASSERT_FALSE(w.Write(writer_, bufs, absl::Seconds(10)));  // later writes copy at once
  std::vector<uint8_t> twice = want;
  twice.insert(twice.end(), want.begin(), want.end());
  EXPECT_TRUE(Join() == twice);
  EXPECT_EQ(w.spliced_bytes(), 0);
  EXPECT_EQ(w.copied_bytes(), static_cast<int64_t>(twice.size()));
}

// splice refused with bytes already in the pipe: they go out first, by copy, then the rest.
TEST_F(SplicePair, SpliceRefusedMidStreamDrainsThePipeInOrder) {
  std::atomic<int> splices{0};
  SpliceCalls calls;
  calls.splice = [&](int in, int out, size_t len, unsigned flags) -> ssize_t {
    if (++splices > 3) {
      errno = EINVAL;
      return -1;
    }
    return ::splice(in, nullptr, out, nullptr, std::min<size_t>(len, 5000), flags);
  };
  std::vector<uint8_t> src = Pattern(5 << 20), want;
  auto bufs = Pieces(src, &want);
  StartReading(want.size());
  SpliceWriter w(calls);
  ASSERT_FALSE(w.Write(writer_, bufs, absl::Seconds(10)));
  EXPECT_TRUE(Join() == want);
  EXPECT_FALSE(w.zero_copy());
  EXPECT_EQ(w.spliced_bytes(), 15000);
  EXPECT_EQ(w.spliced_bytes() + w.copied_bytes(), static_cast<int64_t>(want.size()));
}

TEST_F(SplicePair, AReaderThatStopsReadingTimesOut) {
  std::vector<uint8_t> src = Pattern(256 << 20);  // more than any socket buffer
  SpliceWriter w;
  error_code ec = w.Write(writer_, asio::buffer(src), absl::Milliseconds(300));
  EXPECT_EQ(ec, asio::error::timed_out) << ec.message();
}

TEST_F(SplicePair, AbortEndsAWaitForSocketSpace) {
  std::vector<uint8_t> src = Pattern(256 << 20);
  SpliceWriter w;
  std::thread abort([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    writer_.Abort();
  });
  const absl::Time t0 = absl::Now();
  error_code ec = w.Write(writer_, asio::buffer(src), absl::Seconds(30));
  abort.join();
  EXPECT_EQ(ec, asio::error::operation_aborted) << ec.message();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(10));
}

// splice raises SIGPIPE when the peer is gone; the writer's thread blocks it (SetUp did, as the
// transport's sender threads do), so the process lives and the write fails with an error.
TEST_F(SplicePair, APeerThatIsGoneFailsTheWriteWithoutKillingTheProcess) {
  reader_.close();
  std::vector<uint8_t> src = Pattern(64 << 20);
  SpliceWriter w;
  error_code ec = w.Write(writer_, asio::buffer(src), absl::Seconds(5));
  EXPECT_TRUE(ec == asio::error::broken_pipe || ec == asio::error::connection_reset) << ec.message();
}

}  // namespace
}  // namespace skyrl::weight_sync::tcp_internal
