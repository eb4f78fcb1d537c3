#include "weight_sync/tcp/tcp_transport.h"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "weight_sync/checksum.h"
#include "weight_sync/delta_codec.h"
#include "weight_sync/tcp/connection.h"
#include "weight_sync/tcp/direct_write.h"
#include "weight_sync/tcp/listener.h"
#include "weight_sync/tcp/lockstep.h"
#include "weight_sync/tcp/splice_writer.h"

namespace skyrl::weight_sync {
namespace {

using namespace tcp_internal;  // NOLINT: asio, tcp, error_code, Connection

constexpr uint32_t kMagic = 0x53574B53;  // "SKWS"
// 4: deltas; 3: direct writes (1: none; 2: direct reads, withdrawn)
constexpr uint32_t kProtocol = 4;
constexpr uint32_t kFlagChecksums = 1;
// The sender can write into the receiver's staging buffer (tcp/direct_write.h).
constexpr uint32_t kFlagDirectWrite = 2;
// The sender holds a version it can send deltas against: the receiver's welcome is followed
// by the version it holds (8 bytes; 0: none, or it takes no deltas).
constexpr uint32_t kFlagDelta = 4;
constexpr size_t kHelloSize = 48, kBucketHeaderSize = 24, kAckSize = 8;
// The receiver's welcome when it grants direct writes: its staging buffer's descriptor rides
// on the welcome, and the grant follows it (kGrantSize bytes, then the runs).
constexpr absl::string_view kDirectGranted = "direct-write";
constexpr size_t kGrantSize = 32;
// Most runs a grant may hold (a bound on what a peer makes the sender allocate: 64 MiB).
constexpr uint32_t kMaxGrantRuns = uint32_t{1} << 22;
// Bucket header, bytes 4-7: how the bucket's bytes came. A delta bucket's header is followed
// by the base version (8 bytes), then frames: a frame header (kind u32, 0 u32, bytes u64,
// wire bytes u64, checksum u64) and its payload, the XOR against the base compressed (the
// checksum is of the result, always checked: it proves the base was the sender's) or the raw
// bytes (checksum 0; the bucket's, when checksums are on, covers them).
constexpr uint32_t kBucketStreamed = 0, kBucketWritten = 1, kBucketDelta = 2;
constexpr size_t kFrameHeaderSize = 32;
// A sender XORs this much of a piece first, and sends the piece raw at once when that holds
// too few zero bytes (a change everywhere) instead of XORing and compressing the rest.
constexpr int64_t kDeltaProbe = int64_t{64} << 10;
constexpr uint32_t kFrameRaw = 0, kFrameXor = 1;
constexpr int64_t kMaxDeltaFrame = int64_t{64} << 20;
constexpr uint32_t kMaxAckMessage = 4096;
// Receivers: SO_RCVLOWAT while payload streams in (see ReceiveFrom).
constexpr int64_t kLowWater = int64_t{4} << 20;
// Senders: SO_SNDBUF on same-host (Unix) connections; 1.1x the default's throughput with
// 3 receivers in a raw experiment (docs/performance.md).
constexpr int kLocalSendBuffer = 4 << 20;

void Put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
void Put64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t Get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

struct Hello {
  uint64_t version = 0;
  uint32_t sender = 0, receiver = 0, flags = 0;
  uint64_t bytes = 0, bucket_bytes = 0;

  std::array<uint8_t, kHelloSize> Encode() const {
    std::array<uint8_t, kHelloSize> b{};
    Put32(&b[0], kMagic);
    Put32(&b[4], kProtocol);
    Put64(&b[8], version);
    Put32(&b[16], sender);
    Put32(&b[20], receiver);
    Put64(&b[24], bytes);
    Put64(&b[32], bucket_bytes);
    Put32(&b[40], flags);
    return b;
  }
};

absl::Status FromAsio(const error_code& ec, absl::string_view what) {
  if (ec == asio::error::timed_out) return absl::DeadlineExceededError(absl::StrCat(what, ": timed out"));
  if (ec == asio::error::operation_aborted)
    return absl::AbortedError(absl::StrCat(what, ": aborted because the sync failed elsewhere"));
  if (ec == asio::error::eof)
    return absl::UnavailableError(absl::StrCat(what, ": peer closed the connection"));
  return absl::UnavailableError(absl::StrCat(what, ": ", ec.message()));
}

// Walks a stream's runs: buffers for the next n bytes.
template <typename Ptr>
class RunCursor {
 public:
  RunCursor(const std::vector<Interval>& runs, Ptr base) : runs_(runs), base_(base) {}
  template <typename Buffer>
  void Next(int64_t n, std::vector<Buffer>& out) {
    out.clear();
    while (n > 0) {
      const Interval& r = runs_[run_];
      int64_t take = std::min(n, r.length - at_);
      out.emplace_back(base_ + r.offset + at_, static_cast<size_t>(take));
      n -= take;
      at_ += take;
      if (at_ == r.length) {
        ++run_;
        at_ = 0;
      }
    }
  }
  // Calls fn(ptr, len) for the next n bytes without moving.
  template <typename Fn>
  void Peek(int64_t n, Fn&& fn) const {
    size_t run = run_;
    int64_t at = at_;
    while (n > 0) {
      const Interval& r = runs_[run];
      int64_t take = std::min(n, r.length - at);
      fn(base_ + r.offset + at, take);
      n -= take;
      at += take;
      if (at == r.length) {
        ++run;
        at = 0;
      }
    }
  }

 private:
  const std::vector<Interval>& runs_;
  Ptr base_;
  size_t run_ = 0;
  int64_t at_ = 0;
};

// Reads a status frame (code, length, message). The outer status is the transport's; the
// inner one is what the receiver said. An OK frame's message (the welcome's answer to a
// direct-read offer) goes to `ok_message` when given.
absl::StatusOr<absl::Status> ReadStatus(Connection& c, absl::Duration timeout, absl::string_view what,
                                        std::string* ok_message = nullptr) {
  std::array<uint8_t, kAckSize> ack{};
  if (error_code ec = c.Read(asio::buffer(ack), timeout); ec) return FromAsio(ec, what);
  const uint32_t code = Get32(&ack[0]), mlen = std::min(Get32(&ack[4]), kMaxAckMessage);
  std::string msg(mlen, '\0');
  if (mlen > 0)
    if (error_code ec = c.Read(asio::buffer(msg), timeout); ec) return FromAsio(ec, what);
  if (code == 0) {
    if (ok_message != nullptr) *ok_message = std::move(msg);
    return absl::OkStatus();
  }
  const auto status_code = code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)
                               ? absl::StatusCode::kUnknown
                               : static_cast<absl::StatusCode>(code);
  return absl::Status(status_code, absl::StrCat("receiver says: ", msg));
}

void WriteFrame(Connection& c, absl::StatusCode code, absl::string_view message, absl::Duration timeout) {
  std::string msg(message.substr(0, kMaxAckMessage));
  std::array<uint8_t, kAckSize> ack{};
  Put32(&ack[0], static_cast<uint32_t>(code));
  Put32(&ack[4], static_cast<uint32_t>(msg.size()));
  std::vector<asio::const_buffer> b{asio::buffer(ack), asio::buffer(msg)};
  c.Write(b, timeout);
}

void WriteStatus(Connection& c, const absl::Status& s, absl::Duration timeout) {
  WriteFrame(c, s.code(), s.message(), timeout);
}

// Sender: a write that failed may be the receiver giving up with a reason: that reason when
// it is there, else the transport's error.
absl::Status FailedWrite(Connection& c, const error_code& ec, absl::string_view what) {
  absl::StatusOr<absl::Status> why = ReadStatus(c, absl::Milliseconds(100), what);
  if (why.ok() && !why->ok()) return *why;
  return FromAsio(ec, what);
}

// The schedule's peers grouped by stream: peers with the same bytes in the same runs (the
// replicas of a broadcast) share a group, in peer order.
std::vector<std::vector<size_t>> IdenticalStreams(const RankSchedule& schedule) {
  std::vector<std::vector<size_t>> groups;
  std::vector<bool> grouped(schedule.peers.size(), false);
  for (size_t i = 0; i < schedule.peers.size(); ++i) {
    if (grouped[i]) continue;
    std::vector<size_t>& same = groups.emplace_back();
    for (size_t j = i; j < schedule.peers.size(); ++j)
      if (!grouped[j] && schedule.peers[j].bytes == schedule.peers[i].bytes &&
          schedule.peers[j].runs == schedule.peers[i].runs) {
        grouped[j] = true;
        same.push_back(j);
      }
  }
  return groups;
}

// Delta frames shared by the connections of one Send that carry identical streams (replicas of
// one shard): each frame is encoded once, by whichever connection needs it first, the others
// wait for it, and it is dropped once every connection still sending deltas has sent it.
class FrameCache {
 public:
  struct Frame {
    bool compressed = false;  // else: sent raw, from the shard
    std::vector<uint8_t> wire;
    uint64_t sum = 0;  // of the frame's result bytes, when compressed
  };
  explicit FrameCache(int members) : members_(members) {}

  std::shared_ptr<const Frame> Get(int64_t index, const std::function<Frame()>& encode) {
    absl::MutexLock lock(&mu_);
    Entry& e = entries_[index];  // (std::map: references stay valid while others come and go)
    if (!e.started) {
      e.started = true;
      e.left = members_;
      mu_.Unlock();
      auto frame = std::make_shared<const Frame>(encode());
      mu_.Lock();
      e.frame = std::move(frame);
    } else {
      mu_.Await(absl::Condition(
          +[](Entry* e) { return e->frame != nullptr; }, &e));
    }
    std::shared_ptr<const Frame> out = e.frame;
    if (--e.left <= 0) entries_.erase(index);
    return out;
  }
  // A connection that sends no more deltas, having got the frames before `next`.
  void Leave(int64_t next) {
    absl::MutexLock lock(&mu_);
    --members_;
    for (auto it = entries_.lower_bound(next); it != entries_.end();) {
      if (--it->second.left <= 0 && it->second.frame != nullptr) {
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
  }

 private:
  struct Entry {
    bool started = false;
    int left = 0;  // connections yet to get it
    std::shared_ptr<const Frame> frame;
  };
  absl::Mutex mu_;
  int members_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(const TcpOptions& o) : o_(o) {}

  absl::Status Listen() {
    error_code ec;
    auto addr = asio::ip::make_address(o_.bind_host, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("bind_host '", o_.bind_host, "': ", ec.message()));
    if (ec = listener_.Open(addr, o_.same_host_unix_socket); ec)
      return absl::UnavailableError(absl::StrCat("receiver ", o_.receiver_rank, ": cannot listen on ",
                                                 o_.bind_host, ": ", ec.message()));
    const std::string& host = o_.advertise_host.empty() ? o_.bind_host : o_.advertise_host;
    std::string where = absl::StrCat(host, ":", listener_.port());
    if (!listener_.local_name().empty())
      absl::StrAppend(&where, " local=", listener_.local_name(), " host=", HostIdentity());
    return o_.rendezvous->Put(ReceiverKey(o_.receiver_rank), where);
  }

  absl::Status Send(uint64_t version, const RankSchedule& schedule, absl::Span<const uint8_t> shard) override;
  absl::Status Receive(uint64_t version, const RankSchedule& schedule, VersionedShard& shard) override;

 private:
  std::string ReceiverKey(int rank) const { return absl::StrCat(o_.key_prefix, "/receiver/", rank); }
  // `lockstep` (may be null) and `member`: this peer's place in a group of identical streams.
  absl::Status SendTo(uint64_t version, int me, const PeerStream& peer, const uint8_t* shard, Connection& c,
                      Lockstep* lockstep, int member, FrameCache* frames);
  // `granted`: this sender may write buckets straight into `staging` (direct writes).
  // `base`: the bytes of the version this receiver holds (`base_version`), which delta
  // buckets apply to (null: it takes none).
  absl::Status ReceiveFrom(const Hello& hello, const PeerStream& peer, uint8_t* staging, Connection& c,
                           bool granted, const uint8_t* base, uint64_t base_version);
  // Sender: reads the receiver's welcome; on a grant of direct writes, returns where in our
  // mapping of its buffer each stream byte goes (the grant's runs) through `*target` and
  // `*target_runs`, else leaves *target null (stream). The outer status is the transport's,
  // the inner one the receiver's answer.
  absl::StatusOr<absl::Status> ReadWelcome(Connection& c, const PeerStream& peer, bool offered,
                                           uint8_t** target, std::vector<Interval>* target_runs);
  // Receiver: the welcome with a grant of direct writes into `buffer` (this peer's `runs`;
  // `keep`: the id of the buffer we serve from, which the sender may keep mapped).
  error_code WriteGrant(Connection& c, const ShardBytes& buffer, uint64_t keep, const PeerStream& peer);
  // Connects `c` to the receiver published as `where`: its Unix socket when it is on this host
  // (and both sides allow it), else TCP. True: over the Unix socket.
  absl::StatusOr<bool> Dial(absl::string_view where, Connection& c);

  // Sender, with `delta`: a delta bucket of `len` bytes at `cursor` against `base` (`base_`,
  // at the same runs), frame by frame.
  // `frames` (shared with connections carrying the same stream) and `frame`: the next
  // frame's index in it.
  absl::Status SendDeltaBucket(uint32_t b, int64_t len, RunCursor<const uint8_t*>& cursor,
                               RunCursor<const uint8_t*>& base, std::array<uint8_t, kBucketHeaderSize>& hdr,
                               Connection& c, SpliceWriter& writer, DeltaEncoder& encoder,
                               std::unique_ptr<uint8_t[]>& x, FrameCache& frames, int64_t& frame);
  // Receiver: applies a delta bucket of `len` bytes to `cursor`'s runs from `base`'s.
  absl::Status ReceiveDeltaBucket(uint32_t b, int64_t len, RunCursor<uint8_t*>& cursor,
                                  RunCursor<const uint8_t*>& base, Connection& c, DeltaDecoder& decoder,
                                  std::vector<uint8_t>& wire, std::unique_ptr<uint8_t[]>& x);

  const TcpOptions o_;
  Listener listener_;        // receivers only
  SharedMappings mappings_;  // senders: receivers' staging buffers (direct writes)
  // Senders with `delta`: the last version at least one receiver confirmed (the whole
  // shard), which receivers that hold it get deltas against. Written by Send between syncs.
  std::vector<uint8_t> base_;
  uint64_t base_version_ = 0;
  // Where each peer's stream lay in it: deltas go to a peer only while its runs are the same.
  std::map<int, std::vector<Interval>> base_runs_;
  // Receivers with `delta`: a version this receiver holds against which a delta failed its
  // checksum (its bytes are not the sender's): it takes every byte until it holds another.
  std::atomic<uint64_t> distrusted_version_{0};
};

absl::StatusOr<bool> TcpTransport::Dial(absl::string_view where, Connection& c) {
  const TransferOptions& t = o_.transfer;
  // "host:port", then optional " local=<name> host=<identity>" (see Listen).
  std::vector<absl::string_view> fields = absl::StrSplit(where, ' ', absl::SkipEmpty());
  if (fields.empty())
    return absl::InvalidArgumentError(absl::StrCat("rendezvous gave address '", where, "'"));
  absl::string_view local_name, host_id;
  for (size_t i = 1; i < fields.size(); ++i) {
    if (absl::ConsumePrefix(&fields[i], "local="))
      local_name = fields[i];
    else if (absl::ConsumePrefix(&fields[i], "host="))
      host_id = fields[i];
  }
  // host:port, split at the last ':' so that IPv6 hosts ("::1:7000" or "[::1]:7000") parse.
  const size_t colon = fields[0].rfind(':');
  int port = 0;
  error_code ec;
  asio::ip::address addr;
  if (colon != absl::string_view::npos) {
    absl::string_view host = fields[0].substr(0, colon);
    if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
    addr = asio::ip::make_address(std::string(host), ec);
  }
  if (colon == absl::string_view::npos || ec || !absl::SimpleAtoi(fields[0].substr(colon + 1), &port) ||
      port <= 0 || port > 65535)
    return absl::InvalidArgumentError(absl::StrCat("rendezvous gave address '", where, "'"));
  if (local_name.size() > kMaxLocalName || local_name.find('\0') != absl::string_view::npos)
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous gave address '", where, "': local= must be a name of 1 to ", kMaxLocalName, " bytes"));

  if (o_.same_host_unix_socket && !local_name.empty() && !HostIdentity().empty() &&
      host_id == HostIdentity()) {
    local::endpoint ep(absl::StrCat(std::string(1, '\0'), local_name));
    // A listener on this host answers at once; the short bound only matters for a full backlog.
    error_code local_ec = c.Connect(ep, std::min(t.io_timeout, absl::Seconds(2)));
    // A non-blocking AF_UNIX connect to a full backlog says EAGAIN, which asio treats as "in
    // progress" and then reports as connected: ask for the peer to be sure.
    if (!local_ec) c.socket().remote_endpoint(local_ec);
    if (!local_ec) {
      // Bigger socket buffers mean fewer wakeups per byte (capped by net.core.wmem_max).
      c.socket().set_option(asio::socket_base::send_buffer_size(kLocalSendBuffer), ec);
      if (o_.stats != nullptr) ++o_.stats->local_connections;
      return true;
    }
    // The name is gone or unreachable after all: TCP still works.
    error_code ignored;
    c.socket().close(ignored);
  }
  if (ec = c.Connect(tcp::endpoint(addr, port), t.io_timeout); ec)
    return FromAsio(ec, absl::StrCat("connect to ", fields[0]));
  c.socket().set_option(tcp::no_delay(true), ec);
  if (o_.stats != nullptr) ++o_.stats->tcp_connections;
  return false;
}

absl::StatusOr<absl::Status> TcpTransport::ReadWelcome(Connection& c, const PeerStream& peer, bool offered,
                                                       uint8_t** target, std::vector<Interval>* target_runs) {
  const TransferOptions& t = o_.transfer;
  constexpr absl::string_view kWhat = "waiting for the receiver to accept";
  *target = nullptr;
  if (!offered) return ReadStatus(c, t.io_timeout, kWhat);
  std::string frame(kAckSize, '\0');
  int fd = -1;
  struct CloseFd {
    int& fd;
    ~CloseFd() {
      if (fd >= 0) close(fd);
    }
  } closer{fd};
  if (error_code ec = ReadWithFd(c, frame, &fd, t.io_timeout); ec) return FromAsio(ec, kWhat);
  const auto* f = reinterpret_cast<const uint8_t*>(frame.data());
  const uint32_t code = Get32(&f[0]), mlen = std::min(Get32(&f[4]), kMaxAckMessage);
  std::string msg(mlen, '\0');
  if (mlen > 0)
    if (error_code ec = c.Read(asio::buffer(msg), t.io_timeout); ec) return FromAsio(ec, kWhat);
  if (code != 0) {
    const auto status_code = code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)
                                 ? absl::StatusCode::kUnknown
                                 : static_cast<absl::StatusCode>(code);
    return absl::Status(status_code, absl::StrCat("receiver says: ", msg));
  }
  if (msg != kDirectGranted) {  // stream; buffers mapped for earlier grants are not needed now
    mappings_.Drop(peer.peer);
    return absl::OkStatus();
  }
  // The grant: buffer id, size, the id to keep mapped, and where our stream goes in it.
  std::array<uint8_t, kGrantSize> g{};
  if (error_code ec = c.Read(asio::buffer(g), t.io_timeout); ec)
    return FromAsio(ec, "reading the receiver's grant");
  const uint64_t id = Get64(&g[0]), size = Get64(&g[8]), keep = Get64(&g[16]);
  const uint32_t count = Get32(&g[24]);
  if (count == 0 || count > kMaxGrantRuns || count > static_cast<uint64_t>(peer.bytes))
    return absl::DataLossError(
        absl::StrCat("the receiver's grant has ", count, " runs for ", peer.bytes, " bytes"));
  std::vector<uint8_t> table(size_t{count} * 16);
  if (error_code ec = c.Read(asio::buffer(table), t.io_timeout); ec)
    return FromAsio(ec, "reading the receiver's grant");
  target_runs->resize(count);
  uint64_t total = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const uint64_t off = Get64(&table[i * 16]), len = Get64(&table[i * 16 + 8]);
    if (len == 0 || len > size || off > size - len || len > static_cast<uint64_t>(peer.bytes) - total)
      return absl::DataLossError(absl::StrCat("the receiver's grant: run ", i, " (", off, "+", len,
                                              ") lies outside its ", size, "-byte buffer or our stream"));
    (*target_runs)[i] = {static_cast<int64_t>(off), static_cast<int64_t>(len)};
    total += len;
  }
  if (total != static_cast<uint64_t>(peer.bytes))
    return absl::DataLossError(
        absl::StrCat("the receiver's grant covers ", total, " bytes, our stream ", peer.bytes));
  // Without the descriptor or a mapping of it we stream (every bucket says how it came).
  if (fd < 0) {
    mappings_.Drop(peer.peer);
    return absl::OkStatus();
  }
  absl::StatusOr<uint8_t*> mapped = mappings_.Map(peer.peer, id, keep, size, fd);
  if (mapped.ok()) *target = *mapped;
  return absl::OkStatus();
}

error_code TcpTransport::WriteGrant(Connection& c, const ShardBytes& buffer, uint64_t keep,
                                    const PeerStream& peer) {
  std::string frame(kAckSize + kDirectGranted.size() + kGrantSize + peer.runs.size() * 16, '\0');
  auto* f = reinterpret_cast<uint8_t*>(frame.data());
  Put32(&f[0], 0);
  Put32(&f[4], static_cast<uint32_t>(kDirectGranted.size()));
  std::memcpy(&f[kAckSize], kDirectGranted.data(), kDirectGranted.size());
  uint8_t* g = &f[kAckSize + kDirectGranted.size()];
  Put64(&g[0], buffer.id());
  Put64(&g[8], buffer.size());
  Put64(&g[16], keep);
  Put32(&g[24], static_cast<uint32_t>(peer.runs.size()));
  for (size_t i = 0; i < peer.runs.size(); ++i) {
    Put64(&g[kGrantSize + i * 16], peer.runs[i].offset);
    Put64(&g[kGrantSize + i * 16 + 8], peer.runs[i].length);
  }
  return WriteWithFd(c, frame, buffer.fd(), o_.transfer.io_timeout);
}

absl::Status TcpTransport::SendDeltaBucket(uint32_t b, int64_t len, RunCursor<const uint8_t*>& cursor,
                                           RunCursor<const uint8_t*>& base,
                                           std::array<uint8_t, kBucketHeaderSize>& hdr, Connection& c,
                                           SpliceWriter& writer, DeltaEncoder& encoder,
                                           std::unique_ptr<uint8_t[]>& x, FrameCache& frames,
                                           int64_t& frame) {
  const TransferOptions& t = o_.transfer;
  const int64_t frame_bytes = std::min(t.chunk_bytes, kMaxDeltaFrame);
  if (x == nullptr) x = std::make_unique_for_overwrite<uint8_t[]>(static_cast<size_t>(frame_bytes));
  if (t.checksums) {
    Checksum sum;
    cursor.Peek(len, [&](const uint8_t* p, int64_t n) { sum.Update(p, n); });
    Put64(&hdr[16], sum.Digest());
  }
  Put32(&hdr[4], kBucketDelta);
  std::array<uint8_t, 8> ext{};
  Put64(&ext[0], base_version_);
  std::vector<asio::const_buffer> head{asio::buffer(hdr), asio::buffer(ext)};
  error_code ec;
  if (ec = c.Write(head, t.io_timeout); ec) return FailedWrite(c, ec, absl::StrCat("bucket ", b, " header"));
  std::vector<asio::const_buffer> bufs, base_bufs;
  // XORs the piece's bytes from `from` on into x, up to `to`.
  auto xor_range = [&](size_t from, size_t to) {
    size_t at = 0;
    for (size_t i = 0; i < bufs.size() && at < to; ++i) {
      const size_t size = bufs[i].size();
      const size_t lo = std::max(from, at), hi = std::min(to, at + size);
      if (lo < hi)
        XorBytes(x.get() + lo, static_cast<const uint8_t*>(bufs[i].data()) + (lo - at),
                 static_cast<const uint8_t*>(base_bufs[i].data()) + (lo - at), hi - lo);
      at += size;
    }
  };
  for (int64_t done = 0; done < len;) {
    const int64_t n = std::min(frame_bytes, len - done);
    const size_t probe = static_cast<size_t>(std::min(n, kDeltaProbe));
    cursor.Next(n, bufs);
    base.Next(n, base_bufs);
    std::shared_ptr<const FrameCache::Frame> f = frames.Get(frame++, [&] {
      FrameCache::Frame out;
      xor_range(0, probe);
      if (!SparseEnough(x.get(), probe)) return out;
      // Worth it only when it saves a tenth at least. One run (most pieces of large
      // parameters): packed as it is XORed; else gathered first.
      const size_t limit = static_cast<size_t>(n - n / 10);
      std::optional<absl::Span<const uint8_t>> wire;
      if (bufs.size() == 1) {
        wire = encoder.CompressXor(static_cast<const uint8_t*>(bufs[0].data()),
                                   static_cast<const uint8_t*>(base_bufs[0].data()), static_cast<size_t>(n),
                                   limit);
      } else {
        xor_range(probe, static_cast<size_t>(n));
        wire = encoder.Compress(x.get(), static_cast<size_t>(n), limit);
      }
      if (!wire) return out;
      out.compressed = true;
      out.wire.assign(wire->begin(), wire->end());
      Checksum sum;
      for (const asio::const_buffer& p : bufs) sum.Update(p.data(), p.size());
      out.sum = sum.Digest();
      return out;
    });
    const bool compressed = f->compressed;
    std::array<uint8_t, kFrameHeaderSize> fh{};
    Put32(&fh[0], compressed ? kFrameXor : kFrameRaw);
    Put64(&fh[8], n);
    Put64(&fh[16], f->wire.size());
    Put64(&fh[24], f->sum);
    if (compressed) {
      std::vector<asio::const_buffer> out{asio::buffer(fh), asio::buffer(f->wire)};
      if (ec = c.Write(out, t.io_timeout); ec)
        return FailedWrite(c, ec, absl::StrCat("bucket ", b, " at byte ", done));
    } else {
      if (ec = c.Write(asio::buffer(fh), t.io_timeout); ec)
        return FailedWrite(c, ec, absl::StrCat("bucket ", b, " at byte ", done));
      if (ec = writer.Write(c, bufs, t.io_timeout); ec)
        return FailedWrite(c, ec, absl::StrCat("bucket ", b, " at byte ", done));
    }
    if (o_.stats != nullptr) {
      o_.stats->delta_bytes += n;
      o_.stats->delta_wire_bytes += compressed ? static_cast<int64_t>(f->wire.size()) : n;
      ++(compressed ? o_.stats->delta_frames : o_.stats->delta_raw_frames);
    }
    done += n;
  }
  return absl::OkStatus();
}

absl::Status TcpTransport::SendTo(uint64_t version, int me, const PeerStream& peer, const uint8_t* shard,
                                  Connection& c, Lockstep* lockstep, int member, FrameCache* frames) {
  const TransferOptions& t = o_.transfer;
  // However this ends, the group stops waiting for this member, and the frames it has not
  // sent are not kept for it.
  int64_t frame = 0;  // the next delta frame's index in `frames`
  struct LeaveOnExit {
    Lockstep*& lockstep;
    int member;
    FrameCache*& frames;
    int64_t& frame;
    ~LeaveOnExit() {
      if (lockstep != nullptr) lockstep->Leave(member);
      if (frames != nullptr) frames->Leave(frame);
    }
  } leave{lockstep, member, frames, frame};
  absl::StatusOr<std::string> where = o_.rendezvous->Get(ReceiverKey(peer.peer), t.io_timeout);
  if (!where.ok()) return where.status();
  absl::StatusOr<bool> local = Dial(*where, c);
  if (!local.ok()) return local.status();
  // Over the Unix socket, offer to write into the receiver's staging buffer (direct writes).
  const bool offer_direct = *local && o_.same_host_direct_write;
  error_code ec;

  Hello h;
  h.version = version;
  h.sender = me;
  h.receiver = peer.peer;
  h.bytes = peer.bytes;
  h.bucket_bytes = t.bucket_bytes;
  const bool offer_delta = o_.delta && base_version_ != 0;
  h.flags = (t.checksums ? kFlagChecksums : 0) | (offer_direct ? kFlagDirectWrite : 0) |
            (offer_delta ? kFlagDelta : 0);
  auto hello = h.Encode();
  if (ec = c.Write(asio::buffer(hello), t.io_timeout); ec) return FromAsio(ec, "hello");
  uint8_t* target = nullptr;  // direct writes: our mapping of the receiver's buffer
  std::vector<Interval> target_runs;
  absl::StatusOr<absl::Status> welcome = ReadWelcome(c, peer, offer_direct, &target, &target_runs);
  if (!welcome.ok()) return welcome.status();
  if (!welcome->ok()) return *welcome;
  // Deltas to a receiver that holds our base (not where we write into its buffer anyway).
  bool use_delta = false;
  if (offer_delta) {
    std::array<uint8_t, 8> held{};
    if (ec = c.Read(asio::buffer(held), t.io_timeout); ec)
      return FromAsio(ec, "the version the receiver holds");
    auto runs = base_runs_.find(peer.peer);
    use_delta = Get64(&held[0]) == base_version_ && target == nullptr && runs != base_runs_.end() &&
                runs->second == peer.runs;
  }
  if (!use_delta && frames != nullptr) {
    frames->Leave(0);
    frames = nullptr;
  }
  if (use_delta && lockstep != nullptr) {  // frames go at the encoder's pace
    lockstep->Leave(member);
    lockstep = nullptr;
  }
  // Only connections to this host go in lockstep: there every byte is copied from our pages
  // by a receiver (or by us, writing directly), best while the page is in the cache.
  if (!*local && lockstep != nullptr) {
    lockstep->Leave(member);
    lockstep = nullptr;
  }
  // Lockstepped writes go in steps of half the window (pipe-sized at the default 2 MiB).
  const int64_t step = lockstep != nullptr ? lockstep->window() / 2 : 0;

  RunCursor<const uint8_t*> cursor(peer.runs, shard);
  std::vector<asio::const_buffer> bufs;
  // One send path: the writer splices, or copies when zero_copy_send is off or the kernel
  // refuses. Its byte counts reach the stats however SendTo ends.
  SpliceWriter writer({}, o_.zero_copy_send);
  struct CountBytes {
    const SpliceWriter& w;
    TcpStats* stats;
    ~CountBytes() {
      if (stats == nullptr) return;
      stats->spliced_bytes += w.spliced_bytes();
      stats->copied_bytes += w.copied_bytes();
    }
  } count{writer, o_.stats};
  int64_t sent = 0;
  RunCursor<uint8_t*> to(target_runs, target);  // direct writes
  std::vector<asio::mutable_buffer> to_bufs;
  RunCursor<const uint8_t*> base_cursor(peer.runs, base_.data());  // deltas
  std::optional<DeltaEncoder> encoder;
  std::unique_ptr<uint8_t[]> x;
  if (use_delta) encoder.emplace();
  for (uint32_t b = 0; sent < peer.bytes; ++b) {
    const int64_t len = std::min(t.bucket_bytes, peer.bytes - sent);
    std::array<uint8_t, kBucketHeaderSize> hdr{};
    Put32(&hdr[0], b);
    Put64(&hdr[8], len);
    if (use_delta) {
      if (absl::Status s =
              SendDeltaBucket(b, len, cursor, base_cursor, hdr, c, writer, *encoder, x, *frames, frame);
          !s.ok())
        return s;
      sent += len;
      continue;
    }
    if (t.checksums) {
      Checksum sum;
      cursor.Peek(len, [&](const uint8_t* p, int64_t n) { sum.Update(p, n); });
      Put64(&hdr[16], sum.Digest());
    }
    if (target != nullptr) {
      // Copy the bucket into the receiver's buffer, then say so with its header.
      for (int64_t done = 0; done < len;) {
        if (c.aborted()) return FromAsio(asio::error::operation_aborted, absl::StrCat("bucket ", b));
        // A receiver that failed meanwhile says so (or hangs up): stop copying for nothing.
        if (PeerSpokeOrLeft(c))
          return FailedWrite(c, asio::error::connection_aborted, absl::StrCat("bucket ", b));
        int64_t n = std::min(t.chunk_bytes, len - done);
        if (lockstep != nullptr) {
          n = std::min(n, step);
          lockstep->Wait(member, sent + done);
        }
        cursor.Next(n, bufs);
        to.Next(n, to_bufs);
        asio::buffer_copy(to_bufs, bufs);
        done += n;
        if (lockstep != nullptr) lockstep->Advance(member, sent + done);
      }
      Put32(&hdr[4], kBucketWritten);
      if (ec = c.Write(asio::buffer(hdr), t.io_timeout); ec)
        return FailedWrite(c, ec, absl::StrCat("bucket ", b, " header"));
      if (o_.stats != nullptr) o_.stats->direct_write_bytes += len;
      sent += len;
      continue;
    }
    if (ec = c.Write(asio::buffer(hdr), t.io_timeout); ec)
      return FailedWrite(c, ec, absl::StrCat("bucket ", b, " header"));
    for (int64_t done = 0; done < len;) {
      int64_t n = std::min(t.chunk_bytes, len - done);
      if (lockstep != nullptr) {
        n = std::min(n, step);
        lockstep->Wait(member, sent + done);
      }
      cursor.Next(n, bufs);
      if (ec = writer.Write(c, bufs, t.io_timeout); ec)
        return FailedWrite(c, ec, absl::StrCat("bucket ", b, " at byte ", done));
      done += n;
      if (lockstep != nullptr) lockstep->Advance(member, sent + done);
    }
    sent += len;
  }
  // The receiver confirms once it has every sender's bytes (or says why not).
  absl::StatusOr<absl::Status> done =
      ReadStatus(c, t.sync_timeout, "waiting for the receiver's confirmation");
  if (!done.ok()) return done.status();
  return *done;
}

absl::Status TcpTransport::Send(uint64_t version, const RankSchedule& schedule,
                                absl::Span<const uint8_t> shard) {
  if (static_cast<int64_t>(shard.size()) < schedule.shard_bytes)
    return absl::InvalidArgumentError(absl::StrCat("sender ", schedule.rank, ": shard has ", shard.size(),
                                                   " bytes, the schedule needs ", schedule.shard_bytes));
  const size_t n = schedule.peers.size();
  std::vector<std::unique_ptr<Connection>> conns;
  for (size_t i = 0; i < n; ++i) conns.push_back(std::make_unique<Connection>());
  // Peers with identical streams (a broadcast) form one lockstep group each; members join now,
  // before any of them sends, and leave again if their connection is not to this host.
  // With deltas, one frame cache per distinct stream, shared by the peers that get it.
  const std::vector<std::vector<size_t>> streams = IdenticalStreams(schedule);
  std::vector<std::unique_ptr<Lockstep>> groups;
  std::vector<std::pair<Lockstep*, int>> member(n, {nullptr, -1});
  std::vector<std::unique_ptr<FrameCache>> caches;
  std::vector<FrameCache*> cache(n, nullptr);
  for (const std::vector<size_t>& same : streams) {
    if (o_.lockstep_window_bytes > 0 && same.size() >= 2) {
      groups.push_back(std::make_unique<Lockstep>(o_.lockstep_window_bytes, absl::Milliseconds(50)));
      for (size_t j : same) member[j] = {groups.back().get(), groups.back()->Join()};
    }
    if (o_.delta && base_version_ != 0) {
      caches.push_back(std::make_unique<FrameCache>(static_cast<int>(same.size())));
      for (size_t j : same) cache[j] = caches.back().get();
    }
  }
  std::vector<absl::Status> results(n);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      BlockSigpipeInThisThread();  // splice raises SIGPIPE on a closed peer; this thread ends here
      results[i] = SendTo(version, schedule.rank, schedule.peers[i], shard.data(), *conns[i], member[i].first,
                          member[i].second, cache[i]);
      // The receiver discards a buffer it granted for a failed sync: do not keep it mapped.
      if (!results[i].ok()) mappings_.Drop(schedule.peers[i].peer);
    });
  for (std::thread& th : threads) th.join();
  // Deltas: receivers that confirmed hold this version now (one that failed, or aborts what
  // it confirmed, says it holds another and is sent every byte).
  if (o_.delta && std::any_of(results.begin(), results.end(), [](const absl::Status& s) { return s.ok(); })) {
    base_.assign(shard.begin(), shard.begin() + schedule.shard_bytes);
    base_version_ = version;
    base_runs_.clear();
    for (const PeerStream& p : schedule.peers) base_runs_[p.peer] = p.runs;
  }
  for (size_t i = 0; i < n; ++i)
    if (!results[i].ok())
      return absl::Status(results[i].code(),
                          absl::StrCat("weight sync v", version, ": sender ", schedule.rank, " -> receiver ",
                                       schedule.peers[i].peer, ": ", results[i].message()));
  return absl::OkStatus();
}

absl::Status TcpTransport::ReceiveDeltaBucket(uint32_t b, int64_t len, RunCursor<uint8_t*>& cursor,
                                              RunCursor<const uint8_t*>& base, Connection& c,
                                              DeltaDecoder& decoder, std::vector<uint8_t>& wire,
                                              std::unique_ptr<uint8_t[]>& x) {
  const TransferOptions& t = o_.transfer;
  std::vector<asio::mutable_buffer> bufs;
  std::vector<asio::const_buffer> base_bufs;
  error_code ec;
  for (int64_t done = 0; done < len;) {
    std::array<uint8_t, kFrameHeaderSize> fh{};
    if (ec = c.Read(asio::buffer(fh), t.io_timeout); ec)
      return FromAsio(ec, absl::StrCat("bucket ", b, " at byte ", done));
    const uint32_t kind = Get32(&fh[0]);
    const uint64_t n = Get64(&fh[8]), wire_n = Get64(&fh[16]);
    if (n == 0 || n > static_cast<uint64_t>(len - done) || n > static_cast<uint64_t>(kMaxDeltaFrame))
      return absl::DataLossError(absl::StrCat("bucket ", b, " at byte ", done, ": a delta frame of ", n,
                                              " bytes (", len - done, " left, ", kMaxDeltaFrame,
                                              " at most)"));
    cursor.Next(static_cast<int64_t>(n), bufs);
    base.Next(static_cast<int64_t>(n), base_bufs);
    if (kind == kFrameRaw) {
      if (wire_n != 0)
        return absl::DataLossError(absl::StrCat("bucket ", b, ": a raw frame with ", wire_n, " wire bytes"));
      if (ec = c.Read(bufs, t.io_timeout); ec)
        return FromAsio(ec, absl::StrCat("bucket ", b, " at byte ", done));
    } else if (kind == kFrameXor) {
      if (wire_n == 0 || wire_n > MaxCompressedBytes(n))
        return absl::DataLossError(
            absl::StrCat("bucket ", b, ": a delta frame of ", wire_n, " wire bytes for ", n, " bytes"));
      wire.resize(wire_n);
      if (ec = c.Read(asio::buffer(wire), t.io_timeout); ec)
        return FromAsio(ec, absl::StrCat("bucket ", b, " at byte ", done));
      Checksum sum;
      if (bufs.size() == 1) {  // one run: applied where it lies (in place: only the changed words)
        if (absl::Status s =
                decoder.Apply(wire.data(), wire.size(), static_cast<const uint8_t*>(base_bufs[0].data()),
                              static_cast<uint8_t*>(bufs[0].data()), n);
            !s.ok())
          return absl::DataLossError(absl::StrCat("bucket ", b, " at byte ", done, ": ", s.message()));
        sum.Update(bufs[0].data(), bufs[0].size());
      } else {
        if (x == nullptr) x = std::make_unique_for_overwrite<uint8_t[]>(static_cast<size_t>(kMaxDeltaFrame));
        if (absl::Status s = decoder.Decompress(wire.data(), wire.size(), x.get(), n); !s.ok())
          return absl::DataLossError(absl::StrCat("bucket ", b, " at byte ", done, ": ", s.message()));
        size_t at = 0;
        for (size_t i = 0; i < bufs.size(); ++i) {
          XorBytes(static_cast<uint8_t*>(bufs[i].data()), static_cast<const uint8_t*>(base_bufs[i].data()),
                   x.get() + at, bufs[i].size());
          sum.Update(bufs[i].data(), bufs[i].size());
          at += bufs[i].size();
        }
      }
      if (sum.Digest() != Get64(&fh[24]))
        return absl::DataLossError(
            absl::StrCat("bucket ", b, " at byte ", done, ": delta frame of ", n,
                         " bytes: checksum mismatch (a base other than the sender's?)"));
    } else {
      return absl::DataLossError(absl::StrCat("bucket ", b, ": unknown delta frame kind ", kind));
    }
    done += static_cast<int64_t>(n);
  }
  return absl::OkStatus();
}

absl::Status TcpTransport::ReceiveFrom(const Hello& h, const PeerStream& peer, uint8_t* staging,
                                       Connection& c, bool granted, const uint8_t* base,
                                       uint64_t base_version) {
  const TransferOptions& t = o_.transfer;
  RunCursor<uint8_t*> cursor(peer.runs, staging);
  RunCursor<const uint8_t*> base_cursor(peer.runs, base);  // deltas
  DeltaDecoder decoder;
  std::vector<uint8_t> wire;
  std::unique_ptr<uint8_t[]> x;
  std::vector<asio::mutable_buffer> bufs;
  int64_t got = 0;
  int low_water = 1;  // the socket's SO_RCVLOWAT
  error_code ec;
  for (uint32_t b = 0; got < peer.bytes; ++b) {
    const int64_t len = std::min<int64_t>(h.bucket_bytes, peer.bytes - got);
    std::array<uint8_t, kBucketHeaderSize> hdr{};
    if (ec = c.Read(asio::buffer(hdr), t.io_timeout); ec)
      return FromAsio(ec, absl::StrCat("bucket ", b, " header"));
    if (Get32(&hdr[0]) != b || static_cast<int64_t>(Get64(&hdr[8])) != len)
      return absl::DataLossError(absl::StrCat("bucket ", b, ": header says bucket ", Get32(&hdr[0]), " of ",
                                              Get64(&hdr[8]), " bytes, expected ", len));
    RunCursor<uint8_t*> start = cursor;
    const uint32_t how = Get32(&hdr[4]);
    if (how == kBucketWritten) {
      // Already in our buffer: the sender wrote it there before sending this header.
      if (!granted)
        return absl::DataLossError(absl::StrCat("bucket ", b,
                                                ": the sender says it wrote it into our buffer, "
                                                "which it was not given"));
      cursor.Next(len, bufs);
    } else if (how == kBucketDelta) {
      std::array<uint8_t, 8> ext{};
      if (ec = c.Read(asio::buffer(ext), t.io_timeout); ec)
        return FromAsio(ec, absl::StrCat("bucket ", b, " header"));
      if (base == nullptr || Get64(&ext[0]) != base_version)
        return absl::DataLossError(absl::StrCat(
            "bucket ", b, ": a delta against version ", Get64(&ext[0]), ", but this receiver holds ",
            base == nullptr ? "none it takes deltas against" : absl::StrCat("version ", base_version)));
      if (absl::Status s = ReceiveDeltaBucket(b, len, cursor, base_cursor, c, decoder, wire, x); !s.ok()) {
        // Corrupt, or not against these bytes: no more deltas against them.
        if (absl::IsDataLoss(s)) distrusted_version_.store(base_version);
        return s;
      }
    } else if (how != kBucketStreamed) {
      return absl::DataLossError(absl::StrCat("bucket ", b, ": unknown way of sending (", how, ")"));
    }
    for (int64_t done = 0; how == kBucketStreamed && done < len;) {
      const int64_t n = std::min(t.chunk_bytes, len - done);
      // (TCP; a Unix socket's poll ignores SO_RCVLOWAT, so there it is harmless and idle.)
      // Wake only once kLowWater bytes wait (fewer wakeups and reads per byte), but never ask
      // for more than the stream still holds when only this chunk's last byte is missing (what
      // follows the chunk, plus one): otherwise its last bytes would never wake the reader.
      const int64_t after = peer.bytes - (got + done + n);
      const int low = static_cast<int>(std::clamp<int64_t>(after + 1, 1, kLowWater));
      if (low != low_water) {
        if (setsockopt(c.socket().native_handle(), SOL_SOCKET, SO_RCVLOWAT, &low, sizeof low) != 0) {
          if (c.aborted()) return FromAsio(asio::error::operation_aborted, absl::StrCat("bucket ", b));
          return absl::InternalError(
              absl::StrCat("setsockopt(SO_RCVLOWAT, ", low, "): ", std::strerror(errno)));
        }
        low_water = low;
      }
      cursor.Next(n, bufs);
      if (ec = c.Read(bufs, t.io_timeout); ec)
        return FromAsio(ec, absl::StrCat("bucket ", b, " at byte ", done));
      done += n;
    }
    if (base != nullptr && how != kBucketDelta) {  // (a sender sends deltas on all buckets or none)
      std::vector<asio::const_buffer> skipped;
      base_cursor.Next(len, skipped);
    }
    if (h.flags & kFlagChecksums) {
      Checksum sum;
      start.Peek(len, [&](const uint8_t* p, int64_t n) { sum.Update(p, n); });
      if (sum.Digest() != Get64(&hdr[16]))
        return absl::DataLossError(absl::StrCat("bucket ", b, " (", len, " bytes): checksum mismatch"));
    }
    got += len;
  }
  return absl::OkStatus();
}

absl::Status TcpTransport::Receive(uint64_t version, const RankSchedule& schedule, VersionedShard& shard) {
  const std::string who = absl::StrCat("weight sync v", version, ": receiver ", schedule.rank);
  if (o_.receiver_rank != schedule.rank)
    return absl::FailedPreconditionError(
        absl::StrCat(who, ": this transport listens as receiver ", o_.receiver_rank));
  if (shard.Bytes() != schedule.shard_bytes)
    return absl::InvalidArgumentError(absl::StrCat(who, ": shard has ", shard.Bytes(),
                                                   " bytes, the schedule needs ", schedule.shard_bytes));
  int64_t incoming = 0;
  for (const PeerStream& p : schedule.peers) incoming += p.bytes;
  // Deltas apply to the live version: beside the staging buffer, or (in place) in it.
  const bool in_place = o_.transfer.staging == Staging::kInPlace;
  uint64_t base_version = 0;
  std::shared_ptr<const ShardBytes> base_bytes;
  if (o_.delta) {
    VersionedShard::Snapshot live = shard.Current();  // (dropped before an in-place start)
    if (live.bytes != nullptr && live.version != 0 && live.version != distrusted_version_.load()) {
      base_version = live.version;
      if (!in_place) base_bytes = std::move(live.bytes);
    }
  }
  // Plans cover each byte at most once, so a schedule as large as the shard overwrites it all.
  absl::StatusOr<absl::Span<uint8_t>> staging =
      shard.BeginStaging(version, incoming < shard.Bytes(), o_.transfer.staging);
  if (!staging.ok())
    return absl::Status(staging.status().code(), absl::StrCat(who, ": ", staging.status().message()));
  const uint8_t* base = base_version == 0 ? nullptr : in_place ? staging->data() : base_bytes->data();
  const TransferOptions& t = o_.transfer;
  // Run any wake-up a failed earlier sync posted, so it cannot end our first wait.
  listener_.Poll();
  // Direct writes: the buffer senders on this host may write into, and the one we serve from
  // (which a later sync will be staged in, so a sender may keep it mapped).
  const std::shared_ptr<ShardBytes> grant_buffer = shard.StagingBuffer();
  uint64_t keep_id = 0;
  if (auto live = shard.Current().bytes; live != nullptr) keep_id = live->id();
  bool any_granted = false;  // then a failed sync must not reuse the buffer

  std::map<int, const PeerStream*> expected;
  for (const PeerStream& p : schedule.peers) expected[p.peer] = &p;
  std::vector<std::unique_ptr<Connection>> conns;
  std::vector<std::thread> threads;
  absl::Mutex mu;
  absl::Status failure;  // first failure, guarded by mu
  std::atomic<bool> failed{false};
  auto fail = [&](absl::Status s) {
    absl::MutexLock lock(&mu);
    if (failure.ok()) failure = std::move(s);
    failed.store(true);
    for (auto& c : conns) c->Abort();
    listener_.Wake();
  };
  auto send_status = [&](Connection& c, const absl::Status& s) { WriteStatus(c, s, t.io_timeout); };

  std::map<int, bool> arrived;
  while (arrived.size() < expected.size() && !failed.load()) {
    std::unique_ptr<Connection> c;
    error_code ec = listener_.Accept(c, t.io_timeout, failed);
    if (failed.load()) break;
    if (ec) {
      std::string missing;
      for (const auto& [s, unused] : expected)
        if (!arrived.count(s)) absl::StrAppend(&missing, missing.empty() ? "" : ",", s);
      fail(FromAsio(ec, absl::StrCat("waiting for sender(s) ", missing, " to connect")));
      break;
    }
    std::array<uint8_t, kHelloSize> hb{};
    if (ec = c->Read(asio::buffer(hb), t.io_timeout); ec) continue;  // not a sender of ours; ignore
    Hello h;
    h.version = Get64(&hb[8]);
    h.sender = Get32(&hb[16]);
    h.receiver = Get32(&hb[20]);
    h.bytes = Get64(&hb[24]);
    h.bucket_bytes = Get64(&hb[32]);
    h.flags = Get32(&hb[40]);
    if (Get32(&hb[0]) != kMagic || Get32(&hb[4]) != kProtocol) {
      send_status(
          *c, absl::FailedPreconditionError(absl::StrCat("not a weight-sync protocol ", kProtocol, " peer")));
      continue;
    }
    absl::Status bad;
    auto it = expected.find(static_cast<int>(h.sender));
    if (h.version != version)
      bad = absl::FailedPreconditionError(
          absl::StrCat("receiver ", schedule.rank, " is syncing version ", version, ", not ", h.version));
    else if (static_cast<int>(h.receiver) != schedule.rank)
      bad = absl::FailedPreconditionError(
          absl::StrCat("this is receiver ", schedule.rank, ", not ", h.receiver));
    else if (it == expected.end() || arrived.count(it->first))
      bad = absl::FailedPreconditionError(
          absl::StrCat("sender ", h.sender, " is not expected (again) by the plan"));
    else if (static_cast<int64_t>(h.bytes) != it->second->bytes)
      bad = absl::FailedPreconditionError(absl::StrCat("sender ", h.sender, " sends ", h.bytes,
                                                       " bytes, the plan says ", it->second->bytes,
                                                       ": the two sides use different plans"));
    else if (h.bucket_bytes == 0)
      bad = absl::FailedPreconditionError("bucket size 0");
    else if (t.checksums && !(h.flags & kFlagChecksums))
      bad = absl::FailedPreconditionError("checksums are required by the receiver");
    if (!bad.ok()) {
      // A stale or foreign connection: refuse it and keep waiting for the right ones.
      send_status(*c, bad);
      continue;
    }
    arrived[it->first] = true;
    // Welcome: start sending. A sender on this host that offers to may write into our staging
    // buffer directly (when it is shared memory and this receiver allows it).
    const bool granted = (h.flags & kFlagDirectWrite) && o_.same_host_direct_write &&
                         grant_buffer != nullptr && grant_buffer->fd() >= 0 && IsLocalSameUser(*c);
    if (granted) {
      any_granted = true;  // from here on the sender may write into the buffer
      WriteGrant(*c, *grant_buffer, keep_id, *it->second);
    } else {
      send_status(*c, absl::OkStatus());
    }
    if (h.flags & kFlagDelta) {  // the version this receiver takes deltas against
      std::array<uint8_t, 8> held{};
      Put64(&held[0], base_version);
      c->Write(asio::buffer(held), t.io_timeout);
    }
    Connection* conn = c.get();
    {
      absl::MutexLock lock(&mu);
      conns.push_back(std::move(c));
      if (failed.load()) conn->Abort();
    }
    const PeerStream* peer = it->second;
    threads.emplace_back([&, h, peer, conn, granted] {
      absl::Status s = ReceiveFrom(h, *peer, staging->data(), *conn, granted, base, base_version);
      if (!s.ok()) {
        send_status(*conn, s);
        fail(absl::Status(s.code(), absl::StrCat("from sender ", h.sender, ": ", s.message())));
      }
      // On success the connection waits for the outcome of the whole receive.
    });
  }
  for (std::thread& th : threads) th.join();
  {
    absl::MutexLock lock(&mu);
    if (!failure.ok()) {
      shard.Abort(/*discard_buffer=*/any_granted);
      return absl::Status(failure.code(), absl::StrCat(who, ": ", failure.message(), " ", Aftermath(shard)));
    }
  }
  shard.MarkPrepared();
  absl::Status result = t.defer_commit ? absl::OkStatus() : shard.Commit();
  for (auto& c : conns) send_status(*c, result);
  return result;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> CreateTcpTransport(const TcpOptions& options) {
  const TransferOptions& t = options.transfer;
  if (options.rendezvous == nullptr) return absl::InvalidArgumentError("tcp options: rendezvous is null");
  if (t.bucket_bytes <= 0) return absl::InvalidArgumentError("transfer.bucket_bytes must be > 0");
  if (options.receiver_rank >= 0 && options.advertise_host.empty() &&
      (options.bind_host == "0.0.0.0" || options.bind_host == "::"))
    return absl::InvalidArgumentError(
        absl::StrCat("tcp options: bind_host ", options.bind_host,
                     " is a wildcard; set advertise_host to an address senders can dial"));
  if (t.chunk_bytes <= 0) return absl::InvalidArgumentError("transfer.chunk_bytes must be > 0");
  if (options.lockstep_window_bytes != 0 && (options.lockstep_window_bytes < (int64_t{64} << 10) ||
                                             options.lockstep_window_bytes > (int64_t{1} << 30)))
    return absl::InvalidArgumentError(
        absl::StrCat("tcp options: lockstep_window_bytes must be 0 (off) or 64 KiB to 1 GiB, not ",
                     options.lockstep_window_bytes));
  if (t.io_timeout <= absl::ZeroDuration())
    return absl::InvalidArgumentError("transfer.io_timeout must be > 0");
  if (t.sync_timeout < t.io_timeout)
    return absl::InvalidArgumentError("transfer.sync_timeout must be >= transfer.io_timeout");
  auto tr = std::make_unique<TcpTransport>(options);
  if (options.receiver_rank >= 0)
    if (absl::Status s = tr->Listen(); !s.ok()) return s;
  return tr;
}

}  // namespace skyrl::weight_sync
