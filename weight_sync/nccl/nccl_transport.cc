#include "weight_sync/nccl/nccl_transport.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace skyrl::weight_sync {
namespace {

absl::Status FromCuda(cudaError_t e, absl::string_view what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": CUDA ", cudaGetErrorName(e), ": ", cudaGetErrorString(e)));
}

absl::Status FromNccl(ncclResult_t r, absl::string_view what) {
  if (r == ncclSuccess || r == ncclInProgress) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(what, ": NCCL ", ncclGetErrorString(r)));
}

struct Header {
  uint64_t version, bytes, bucket_bytes, reserved;
};

class NcclTransport final : public Transport {
 public:
  NcclTransport(const NcclOptions& o, ncclComm_t comm, cudaStream_t stream) : o_(o), comm_(comm), stream_(stream) {}
  ~NcclTransport() override {
    if (comm_ != nullptr) (aborted_ ? ncclCommAbort(comm_) : ncclCommDestroy(comm_));
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Send(uint64_t version, const RankSchedule& schedule, absl::Span<const uint8_t> shard) override {
    if (!o_.is_sender) return absl::FailedPreconditionError("nccl: this endpoint is a receiver");
    return Run(version, schedule, const_cast<uint8_t*>(shard.data()), /*sending=*/true);
  }

  absl::Status Receive(uint64_t version, const RankSchedule& schedule, VersionedShard& shard) override {
    if (o_.is_sender) return absl::FailedPreconditionError("nccl: this endpoint is a sender");
    if (shard.Bytes() != schedule.shard_bytes)
      return absl::InvalidArgumentError(absl::StrCat("nccl receiver ", o_.rank, ": shard has ", shard.Bytes(),
                                                     " bytes, the schedule needs ", schedule.shard_bytes));
    int64_t incoming = 0;
    for (const PeerStream& p : schedule.peers) incoming += p.bytes;
    auto staging = shard.BeginStaging(version, incoming < shard.Bytes(), o_.transfer.staging);
    if (!staging.ok()) return staging.status();
    absl::Status s = Run(version, schedule, staging->data(), /*sending=*/false);
    if (!s.ok()) {
      shard.Abort();
      return absl::Status(s.code(), absl::StrCat(s.message(), " ", Aftermath(shard)));
    }
    shard.MarkPrepared();
    return o_.transfer.defer_commit ? absl::OkStatus() : shard.Commit();
  }

 private:
  int GlobalRank(int peer, bool peer_is_sender) const { return peer_is_sender ? peer : o_.num_senders + peer; }

  // Waits for the stream with a deadline; aborts the communicator on timeout or NCCL error.
  absl::Status Wait(absl::string_view what) {
    const absl::Time deadline = absl::Now() + o_.transfer.io_timeout;
    while (true) {
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        Abort();
        return FromNccl(async, what);
      }
      cudaError_t q = cudaStreamQuery(stream_);
      if (q == cudaSuccess && async == ncclSuccess) return absl::OkStatus();
      if (q != cudaSuccess && q != cudaErrorNotReady) {
        Abort();
        return FromCuda(q, what);
      }
      if (absl::Now() >= deadline) {
        Abort();
        return absl::DeadlineExceededError(absl::StrCat(what, ": no completion within ",
                                                        absl::FormatDuration(o_.transfer.io_timeout),
                                                        "; communicator aborted"));
      }
      absl::SleepFor(absl::Microseconds(50));
    }
  }
  void Abort() {
    if (!aborted_ && comm_ != nullptr) ncclCommAbort(comm_);
    aborted_ = true;
    comm_ = nullptr;
  }

  absl::Status Run(uint64_t version, const RankSchedule& schedule, uint8_t* shard, bool sending) {
    const std::string who = absl::StrCat("weight sync v", version, ": nccl ", sending ? "sender " : "receiver ", o_.rank);
    if (aborted_) return absl::FailedPreconditionError(absl::StrCat(who, ": communicator was aborted; recreate the transport"));
    if (absl::Status s = FromCuda(cudaSetDevice(o_.device), who); !s.ok()) return s;
    const size_t n = schedule.peers.size();
    const int64_t bucket = o_.transfer.bucket_bytes;
    // 1. Headers: the pair agrees on version, bytes and bucket size before any data moves.
    Header* dev_headers = nullptr;
    std::vector<Header> headers(n);
    for (size_t i = 0; i < n; ++i)
      headers[i] = {version, static_cast<uint64_t>(schedule.peers[i].bytes), static_cast<uint64_t>(bucket), 0};
    if (absl::Status s = FromCuda(cudaMalloc(&dev_headers, std::max<size_t>(1, n) * sizeof(Header)), who); !s.ok()) return s;
    auto free_headers = [&] { cudaFree(dev_headers); };
    if (sending)
      cudaMemcpyAsync(dev_headers, headers.data(), n * sizeof(Header), cudaMemcpyHostToDevice, stream_);
    ncclGroupStart();
    for (size_t i = 0; i < n; ++i) {
      int peer = GlobalRank(schedule.peers[i].peer, !sending);
      if (sending) ncclSend(dev_headers + i, sizeof(Header), ncclUint8, peer, comm_, stream_);
      else ncclRecv(dev_headers + i, sizeof(Header), ncclUint8, peer, comm_, stream_);
    }
    absl::Status st = FromNccl(ncclGroupEnd(), absl::StrCat(who, ": headers"));
    if (st.ok()) st = Wait(absl::StrCat(who, ": headers"));
    if (st.ok() && !sending) {
      std::vector<Header> got(n);
      cudaMemcpy(got.data(), dev_headers, n * sizeof(Header), cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < n && st.ok(); ++i)
        if (got[i].version != version || got[i].bytes != headers[i].bytes || got[i].bucket_bytes != headers[i].bucket_bytes)
          st = absl::FailedPreconditionError(absl::StrCat(
              who, ": sender ", schedule.peers[i].peer, " sends version ", got[i].version, ", ", got[i].bytes,
              " bytes in buckets of ", got[i].bucket_bytes, "; expected version ", version, ", ", headers[i].bytes,
              " bytes in buckets of ", bucket));
    }
    free_headers();
    if (!st.ok()) {
      // The peers are still waiting on this pair: abort so they fail too instead of hanging.
      Abort();
      return st;
    }
    // 2. Buckets: round k moves bucket k of every pair that has one.
    std::vector<uint8_t*> dev(n, nullptr);
    auto free_dev = [&] {
      for (uint8_t* p : dev) cudaFree(p);
    };
    for (size_t i = 0; i < n; ++i)
      if (absl::Status s = FromCuda(cudaMalloc(&dev[i], std::min(bucket, schedule.peers[i].bytes)), who); !s.ok()) {
        free_dev();
        return s;
      }
    struct Cursor {
      size_t run = 0;
      int64_t at = 0;
    };
    std::vector<Cursor> cur(n);
    std::vector<int64_t> moved(n, 0);
    // Copies `len` stream bytes of pair i between its device bucket and the shard's runs.
    auto copy_runs = [&](size_t i, int64_t len, bool to_bucket) {
      const std::vector<Interval>& runs = schedule.peers[i].runs;
      int64_t done = 0;
      while (done < len) {
        const Interval& r = runs[cur[i].run];
        int64_t take = std::min(len - done, r.length - cur[i].at);
        uint8_t* host = shard + r.offset + cur[i].at;
        if (to_bucket) cudaMemcpyAsync(dev[i] + done, host, take, cudaMemcpyDefault, stream_);
        else cudaMemcpyAsync(host, dev[i] + done, take, cudaMemcpyDefault, stream_);
        done += take;
        cur[i].at += take;
        if (cur[i].at == r.length) {
          ++cur[i].run;
          cur[i].at = 0;
        }
      }
    };
    for (int64_t round = 0;; ++round) {
      std::vector<int64_t> len(n, 0);
      bool any = false;
      for (size_t i = 0; i < n; ++i) {
        len[i] = std::min(bucket, schedule.peers[i].bytes - moved[i]);
        any |= len[i] > 0;
        if (sending && len[i] > 0) copy_runs(i, len[i], true);
      }
      if (!any) break;
      ncclGroupStart();
      for (size_t i = 0; i < n; ++i) {
        if (len[i] == 0) continue;
        int peer = GlobalRank(schedule.peers[i].peer, !sending);
        if (sending) ncclSend(dev[i], len[i], ncclUint8, peer, comm_, stream_);
        else ncclRecv(dev[i], len[i], ncclUint8, peer, comm_, stream_);
      }
      st = FromNccl(ncclGroupEnd(), absl::StrCat(who, ": bucket ", round));
      if (st.ok() && !sending)
        for (size_t i = 0; i < n; ++i)
          if (len[i] > 0) copy_runs(i, len[i], false);
      if (st.ok()) st = Wait(absl::StrCat(who, ": bucket ", round));
      if (!st.ok()) {
        free_dev();
        return st;
      }
      for (size_t i = 0; i < n; ++i) moved[i] += len[i];
    }
    free_dev();
    return absl::OkStatus();
  }

  const NcclOptions o_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  bool aborted_ = false;
};

}  // namespace

absl::Status ValidateNcclOptions(const NcclOptions& o) {
  if (o.rendezvous == nullptr) return absl::InvalidArgumentError("nccl options: rendezvous is null");
  if (o.num_senders < 1 || o.num_receivers < 1)
    return absl::InvalidArgumentError("nccl options: num_senders and num_receivers must be >= 1");
  if (o.rank < 0 || o.rank >= (o.is_sender ? o.num_senders : o.num_receivers))
    return absl::InvalidArgumentError(absl::StrCat("nccl options: rank ", o.rank, " outside its side"));
  if (o.device < 0) return absl::InvalidArgumentError("nccl options: device must be >= 0");
  if (o.transfer.bucket_bytes <= 0) return absl::InvalidArgumentError("nccl options: transfer.bucket_bytes must be > 0");
  if (o.transfer.io_timeout <= absl::ZeroDuration())
    return absl::InvalidArgumentError("nccl options: transfer.io_timeout must be > 0");
  if (o.transfer.checksums)
    return absl::UnimplementedError("nccl options: transfer.checksums is not supported by the NCCL transport yet");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Transport>> CreateNcclTransport(const NcclOptions& o) {
  if (absl::Status s = ValidateNcclOptions(o); !s.ok()) return s;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || o.device >= count)
    return absl::FailedPreconditionError(absl::StrCat("nccl: CUDA device ", o.device, " not available (",
                                                      e == cudaSuccess ? absl::StrCat(count, " devices") : cudaGetErrorName(e), ")"));
  if (absl::Status s = FromCuda(cudaSetDevice(o.device), "nccl: cudaSetDevice"); !s.ok()) return s;
  const int world = o.num_senders + o.num_receivers;
  const int global = o.is_sender ? o.rank : o.num_senders + o.rank;
  const std::string key = absl::StrCat(o.key_prefix, "/nccl_id");
  ncclUniqueId id;
  if (global == 0) {
    if (absl::Status s = FromNccl(ncclGetUniqueId(&id), "nccl: ncclGetUniqueId"); !s.ok()) return s;
    if (absl::Status s = o.rendezvous->Put(key, absl::BytesToHexString(absl::string_view(id.internal, sizeof id.internal)));
        !s.ok())
      return s;
  } else {
    absl::StatusOr<std::string> hex = o.rendezvous->Get(key, o.transfer.io_timeout);
    if (!hex.ok()) return hex.status();
    std::string raw = absl::HexStringToBytes(*hex);
    if (raw.size() != sizeof id.internal)
      return absl::InvalidArgumentError(absl::StrCat("nccl: rendezvous key ", key, " holds ", raw.size(), " bytes"));
    std::memcpy(id.internal, raw.data(), sizeof id.internal);
  }
  cudaStream_t stream = nullptr;
  if (absl::Status s = FromCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "nccl: stream"); !s.ok()) return s;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  absl::Status s = FromNccl(ncclCommInitRankConfig(&comm, world, id, global, &config), "nccl: ncclCommInitRankConfig");
  const absl::Time deadline = absl::Now() + o.transfer.io_timeout;
  ncclResult_t state = ncclInProgress;
  while (s.ok()) {
    ncclCommGetAsyncError(comm, &state);
    if (state != ncclInProgress) break;
    if (absl::Now() >= deadline) {
      s = absl::DeadlineExceededError(absl::StrCat("nccl: communicator of ", world, " ranks not formed within ",
                                                   absl::FormatDuration(o.transfer.io_timeout)));
      break;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  if (s.ok()) s = FromNccl(state, "nccl: communicator init");
  if (!s.ok()) {
    if (comm != nullptr) ncclCommAbort(comm);
    cudaStreamDestroy(stream);
    return s;
  }
  return std::unique_ptr<Transport>(new NcclTransport(o, comm, stream));
}

}  // namespace skyrl::weight_sync
