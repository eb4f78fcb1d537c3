#include "weight_sync/nccl/nccl_transport.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "weight_sync/checksum.h"

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

absl::Duration InitTimeout(const NcclOptions& o) {
  return o.init_timeout > absl::ZeroDuration() ? o.init_timeout : o.transfer.io_timeout;
}

// Polls a non-blocking communicator until its last call (creation, or an enqueue) is done:
// OK, its NCCL error, or DeadlineExceeded "<what>: not done within <limit>" after `limit`.
absl::Status AwaitComm(ncclComm_t comm, absl::Duration limit, absl::string_view what) {
  const absl::Time deadline = absl::Now() + limit;
  while (true) {
    ncclResult_t state = ncclInProgress;
    ncclCommGetAsyncError(comm, &state);
    if (state != ncclInProgress) return FromNccl(state, what);
    if (absl::Now() >= deadline)
      return absl::DeadlineExceededError(
          absl::StrCat(what, ": not done within ", absl::FormatDuration(limit)));
    absl::SleepFor(absl::Microseconds(50));
  }
}

// Sender to receiver, one per pair, before any data. Plain bytes on the wire (both ends run
// this build), 8-byte aligned.
struct Header {
  uint64_t version = 0, bytes = 0, bucket_bytes = 0;
  uint64_t group_key = 0;  // broadcast group (0: point to point)
  uint32_t checksums = 0;  // 1: a digest follows every bucket
  int32_t group_size = 0;  // ranks of the group's communicator (sender + receivers); 0: none
  int32_t group_rank = 0;  // this receiver's rank in it, 1..group_size-1 (the sender is 0)
  uint32_t fresh = 0;      // 1: create the group's communicator from `id`; 0: reuse it
  ncclUniqueId id{};
};
static_assert(sizeof(Header) % 8 == 0);

// Receiver to sender after the last bucket.
struct Confirm {
  int32_t code = 0;     // absl::StatusCode of the receiver's first failure, 0 when none
  int32_t bucket = -1;  // where it happened, -1 before the buckets
};

uint64_t GroupKey(int root, const std::vector<int>& members) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the root and the sorted members
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  mix(static_cast<uint64_t>(root));
  mix(members.size());
  for (int m : members) mix(static_cast<uint64_t>(m));
  return h == 0 ? 1 : h;  // 0 means "no group"
}

// A communicator and the stream its work runs on: the main one, or a broadcast group's.
struct CommStream {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

// The one teardown of a CommStream, leaving it empty. `abort` after a failure: a kernel waiting
// on a peer ends only by ncclCommAbort, while ncclCommDestroy would wait for it. The stream goes
// after its communicator (work still queued on it is released once the device is done with it).
void Release(CommStream& c, bool abort) {
  if (c.comm != nullptr) (abort ? ncclCommAbort(c.comm) : ncclCommDestroy(c.comm));
  if (c.stream != nullptr) cudaStreamDestroy(c.stream);
  c = CommStream{};
}

// A broadcast group: (the root's global rank, GroupKey of root and members).
using GroupId = std::pair<int, uint64_t>;

class NcclTransport final : public Transport {
 public:
  // Takes ownership of `main` (communicator and stream).
  NcclTransport(const NcclOptions& o, CommStream main) : o_(o), main_(main) {}
  ~NcclTransport() override {
    cudaSetDevice(o_.device);
    ReleaseAll(/*abort=*/false);  // after an abort nothing is left
  }

  absl::Status Send(uint64_t version, const RankSchedule& schedule,
                    absl::Span<const uint8_t> shard) override {
    if (!o_.is_sender) return absl::FailedPreconditionError("nccl: this endpoint is a receiver");
    if (static_cast<int64_t>(shard.size()) < schedule.shard_bytes)
      return absl::InvalidArgumentError(absl::StrCat("nccl sender ", o_.rank, ": shard has ", shard.size(),
                                                     " bytes, the schedule needs ", schedule.shard_bytes));
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
  int GlobalRank(int peer, bool peer_is_sender) const {
    return peer_is_sender ? peer : o_.num_senders + peer;
  }
  int MyGlobalRank() const { return o_.is_sender ? o_.rank : o_.num_senders + o_.rank; }

  // Waits until every pending stream is idle, with a deadline. Only called inside RunBody: on
  // a timeout or NCCL/CUDA error, Run aborts every communicator before freeing the scratch.
  absl::Status Wait(const std::vector<CommStream>& pending, absl::string_view what,
                    std::optional<absl::Duration> timeout = std::nullopt) {
    const absl::Duration limit = timeout.value_or(o_.transfer.io_timeout);
    const absl::Time deadline = absl::Now() + limit;
    while (true) {
      bool done = true;
      for (const CommStream& p : pending) {
        ncclResult_t async = ncclSuccess;
        if (p.comm != nullptr) ncclCommGetAsyncError(p.comm, &async);
        if (async != ncclSuccess && async != ncclInProgress) return FromNccl(async, what);
        cudaError_t q = cudaStreamQuery(p.stream);
        if (q != cudaSuccess && q != cudaErrorNotReady) return FromCuda(q, what);
        done &= q == cudaSuccess && async == ncclSuccess;
      }
      if (done) return absl::OkStatus();
      if (absl::Now() >= deadline)
        return absl::DeadlineExceededError(absl::StrCat(
            what, ": no completion within ", absl::FormatDuration(limit), "; communicator aborted"));
      absl::SleepFor(absl::Microseconds(50));
    }
  }
  absl::Status WaitMain(absl::string_view what, std::optional<absl::Duration> timeout = std::nullopt) {
    return Wait({main_}, what, timeout);
  }
  // A non-blocking communicator may still be enqueueing the last call's work (ncclInProgress):
  // wait for that before issuing on another communicator, so that every rank's streams get
  // their kernels in the same order.
  absl::Status Issued(ncclComm_t comm, absl::string_view what) {
    return AwaitComm(comm, o_.transfer.io_timeout, absl::StrCat(what, ": enqueue"));
  }

  // Frees the main communicator and every broadcast group's, aborting or destroying them.
  void ReleaseAll(bool abort) {
    Release(main_, abort);
    for (auto& [id, g] : groups_) Release(g, abort);
    groups_.clear();
  }

  // Ends every communicator's work (the transport is unusable afterwards; RunBody says so).
  void Abort() {
    ReleaseAll(/*abort=*/true);
    aborted_ = true;
  }

  // Creates the communicators of `starting` (group rank and size given) all at once, so that
  // ranks in several groups never wait on each other's creation order.
  struct NewGroup {
    GroupId key;
    ncclUniqueId id;
    int size = 0, rank = 0;
  };
  absl::Status CreateGroups(const std::vector<NewGroup>& starting, absl::string_view who) {
    if (starting.empty()) return absl::OkStatus();
    std::vector<CommStream*> made;
    absl::Status st;
    for (const NewGroup& n : starting) {
      CommStream& g = groups_[n.key];
      Release(g, /*abort=*/false);  // the sender started the group afresh; the old one is idle
      st = FromCuda(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking), who);
      if (!st.ok()) break;
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      st = FromNccl(ncclCommInitRankConfig(&g.comm, n.size, n.id, n.rank, &config),
                    absl::StrCat(who, ": broadcast group of ", n.size, " ranks"));
      made.push_back(&g);
      if (!st.ok()) break;
    }
    // One deadline for all: they form together.
    const absl::Time deadline = absl::Now() + InitTimeout(o_);
    for (CommStream* g : made)
      if (st.ok() && g->comm != nullptr)
        st = AwaitComm(g->comm, std::max(absl::ZeroDuration(), deadline - absl::Now()),
                       absl::StrCat(who, ": broadcast group init"));
    return st;  // Run aborts every communicator on failure
  }

  // Destroys the broadcast groups the last successful sync did not use (layouts changed). The
  // sender decides membership, so every member drops a group in the same sync; destroying a
  // communicator is local in NCCL, so no rank waits for another.
  void PruneGroups(const std::map<GroupId, size_t>& used) {
    for (auto it = groups_.begin(); it != groups_.end();) {
      if (used.contains(it->first)) {
        ++it;
        continue;
      }
      Release(it->second, /*abort=*/false);
      it = groups_.erase(it);
    }
  }

  // Runs a sync; on any failure except one the receiver reported cleanly to its senders (a
  // checksum mismatch), every communicator is aborted BEFORE the scratch buffers are freed:
  // cudaFree waits for the device, and an NCCL kernel waiting on a peer only ends by abort.
  absl::Status Run(uint64_t version, const RankSchedule& schedule, uint8_t* shard, bool sending) {
    std::vector<void*> allocations;
    bool reported = false;
    absl::Status st = RunBody(version, schedule, shard, sending, allocations, reported);
    if (!st.ok() && !reported) Abort();
    for (void* p : allocations) cudaFree(p);
    return st;
  }

  absl::Status RunBody(uint64_t version, const RankSchedule& schedule, uint8_t* shard, bool sending,
                       std::vector<void*>& allocations, bool& reported) {
    const std::string who =
        absl::StrCat("weight sync v", version, ": nccl ", sending ? "sender " : "receiver ", o_.rank);
    if (aborted_)
      return absl::FailedPreconditionError(
          absl::StrCat(who, ": communicator was aborted; recreate the transport"));
    if (absl::Status s = FromCuda(cudaSetDevice(o_.device), who); !s.ok()) return s;
    const size_t n = schedule.peers.size();
    const int64_t bucket = o_.transfer.bucket_bytes;
    const bool checksums = o_.transfer.checksums;
    auto peer_name = [&](size_t i) {
      return absl::StrCat(sending ? "receiver " : "sender ", schedule.peers[i].peer);
    };

    // Device scratch, freed by Run after any abort.
    const std::string peers_text = [&] {
      std::string t;
      for (const PeerStream& p : schedule.peers) absl::StrAppend(&t, t.empty() ? "" : ", ", p.peer);
      return absl::StrCat(sending ? " (receivers " : " (senders ", t, ")");
    }();
    auto dev_alloc = [&](size_t bytes, void** out) {
      absl::Status s = FromCuda(cudaMalloc(out, std::max<size_t>(1, bytes)), who);
      if (s.ok()) allocations.push_back(*out);
      return s;
    };
    auto cuda = [&](cudaError_t e, absl::string_view what) {
      return FromCuda(e, absl::StrCat(who, ": ", what));
    };

    // 1. Headers, and which pairs go by broadcast (headers[i].group_size != 0, on both sides
    // once the receiver has the sender's headers). rep[i]: the peer index whose device bucket
    // carries pair i's bytes (itself, or its group's first member on the sender).
    std::vector<Header> headers(n);
    std::vector<size_t> rep(n);
    std::vector<NewGroup> starting;
    for (size_t i = 0; i < n; ++i) {
      rep[i] = i;
      headers[i].version = version;
      headers[i].bytes = static_cast<uint64_t>(schedule.peers[i].bytes);
      headers[i].bucket_bytes = static_cast<uint64_t>(bucket);
      headers[i].checksums = checksums ? 1 : 0;
    }
    if (sending && o_.broadcast) {
      for (const std::vector<size_t>& g : GroupIdenticalStreams(schedule)) {
        if (g.size() < 2) continue;
        std::vector<int> members;
        for (size_t i : g) members.push_back(schedule.peers[i].peer);
        std::sort(members.begin(), members.end());
        const GroupId key{MyGlobalRank(), GroupKey(MyGlobalRank(), members)};
        const bool fresh = !groups_.contains(key) || groups_[key].comm == nullptr;
        ncclUniqueId id{};
        if (fresh) {
          if (absl::Status s = FromNccl(ncclGetUniqueId(&id), absl::StrCat(who, ": ncclGetUniqueId"));
              !s.ok())
            return s;
          starting.push_back({key, id, static_cast<int>(g.size()) + 1, 0});
        }
        for (size_t j = 0; j < g.size(); ++j) {
          Header& h = headers[g[j]];
          h.group_key = key.second;
          h.group_size = static_cast<int>(g.size()) + 1;
          h.group_rank = static_cast<int>(j) + 1;
          h.fresh = fresh ? 1 : 0;
          h.id = id;
          rep[g[j]] = g[0];
        }
      }
    }
    Header* dev_headers = nullptr;
    if (absl::Status s = dev_alloc(n * sizeof(Header), reinterpret_cast<void**>(&dev_headers)); !s.ok())
      return s;
    if (sending)
      if (absl::Status s = cuda(cudaMemcpyAsync(dev_headers, headers.data(), n * sizeof(Header),
                                                cudaMemcpyHostToDevice, main_.stream),
                                "headers copy");
          !s.ok())
        return s;
    absl::Status st = FromNccl(ncclGroupStart(), who);
    for (size_t i = 0; i < n && st.ok(); ++i) {
      int peer = GlobalRank(schedule.peers[i].peer, !sending);
      st = FromNccl(
          sending ? ncclSend(dev_headers + i, sizeof(Header), ncclUint8, peer, main_.comm, main_.stream)
                  : ncclRecv(dev_headers + i, sizeof(Header), ncclUint8, peer, main_.comm, main_.stream),
          absl::StrCat(who, ": headers"));
    }
    if (absl::Status e = FromNccl(ncclGroupEnd(), absl::StrCat(who, ": headers")); st.ok()) st = e;
    if (st.ok()) st = WaitMain(absl::StrCat(who, ": headers", peers_text));
    if (st.ok() && !sending) {
      std::vector<Header> got(n);
      st = FromCuda(cudaMemcpy(got.data(), dev_headers, n * sizeof(Header), cudaMemcpyDeviceToHost), who);
      for (size_t i = 0; i < n && st.ok(); ++i) {
        const Header& g = got[i];
        if (g.version != version || g.bytes != headers[i].bytes ||
            g.bucket_bytes != headers[i].bucket_bytes || g.checksums != headers[i].checksums) {
          st = absl::FailedPreconditionError(absl::StrCat(
              who, ": sender ", schedule.peers[i].peer, " sends version ", g.version, ", ", g.bytes,
              " bytes in buckets of ", g.bucket_bytes, g.checksums ? " with" : " without",
              " checksums; expected version ", version, ", ", headers[i].bytes, " bytes in buckets of ",
              bucket, checksums ? " with" : " without", " checksums"));
          break;
        }
        if (g.group_size == 0) continue;  // point to point
        if (g.group_size < 2 || g.group_size > o_.num_receivers + 1 || g.group_rank < 1 ||
            g.group_rank >= g.group_size || g.group_key == 0) {
          st = absl::DataLossError(absl::StrCat(who, ": sender ", schedule.peers[i].peer,
                                                " sent a malformed broadcast group (size ", g.group_size,
                                                ", rank ", g.group_rank, ")"));
          break;
        }
        headers[i] = g;  // a broadcast pair: its group, as the sender decided
        const GroupId key{GlobalRank(schedule.peers[i].peer, true), g.group_key};
        if (g.fresh) {
          starting.push_back({key, g.id, g.group_size, g.group_rank});
        } else if (!groups_.contains(key) || groups_[key].comm == nullptr) {
          st = absl::FailedPreconditionError(
              absl::StrCat(who, ": sender ", schedule.peers[i].peer,
                           " reuses a broadcast group this rank does not have (a transport was recreated "
                           "alone); recreate every rank's transport"));
          break;
        }
      }
    }
    if (!st.ok()) return st;  // Run aborts: the peers then fail too instead of hanging
    // The broadcasts this rank takes part in, keyed by GroupId: the one order every rank issues
    // them in. Each maps to its first pair (a group's pairs carry the same bytes).
    auto by_broadcast = [&](size_t i) { return headers[i].group_size != 0; };
    std::map<GroupId, size_t> bcasts;
    for (size_t i = 0; i < n; ++i)
      if (by_broadcast(i))
        bcasts.emplace(GroupId{sending ? MyGlobalRank() : GlobalRank(schedule.peers[i].peer, true),
                               headers[i].group_key},
                       i);
    // 2. Broadcast groups that are new to this sync's ranks.
    if (absl::Status s = CreateGroups(starting, who); !s.ok()) return s;

    // 3. Buckets: round k moves bucket k of every pair that has one.
    std::vector<uint8_t*> dev(n, nullptr);
    for (size_t i = 0; i < n; ++i)
      if (rep[i] == i)
        if (absl::Status s =
                dev_alloc(std::min(bucket, schedule.peers[i].bytes), reinterpret_cast<void**>(&dev[i]));
            !s.ok())
          return s;
    uint64_t* dev_digest = nullptr;
    if (absl::Status s = dev_alloc(n * sizeof(uint64_t), reinterpret_cast<void**>(&dev_digest)); !s.ok())
      return s;
    std::vector<CommStream> pending = {main_};
    for (const auto& [id, first] : bcasts) pending.push_back(groups_.at(id));

    struct Cursor {
      size_t run = 0;
      int64_t at = 0;
    };
    std::vector<Cursor> cur(n);
    std::vector<int64_t> moved(n, 0);
    // Copies `len` stream bytes of pair i between its device bucket and the shard's runs.
    auto copy_runs = [&](size_t i, int64_t len, bool to_bucket) -> absl::Status {
      const std::vector<Interval>& runs = schedule.peers[i].runs;
      uint8_t* buf = dev[rep[i]];
      int64_t done = 0;
      while (done < len) {
        const Interval& r = runs[cur[i].run];
        int64_t take = std::min(len - done, r.length - cur[i].at);
        uint8_t* host = shard + r.offset + cur[i].at;
        cudaError_t e = to_bucket ? cudaMemcpyAsync(buf + done, host, take, cudaMemcpyDefault, main_.stream)
                                  : cudaMemcpyAsync(host, buf + done, take, cudaMemcpyDefault, main_.stream);
        if (e != cudaSuccess) return cuda(e, to_bucket ? "gather" : "scatter");
        done += take;
        cur[i].at += take;
        if (cur[i].at == r.length) {
          ++cur[i].run;
          cur[i].at = 0;
        }
      }
      return absl::OkStatus();
    };
    // The digest of `len` bytes of a device bucket (a host copy: checksums are a test aid).
    std::vector<uint8_t> host_copy;
    auto digest = [&](const uint8_t* buf, int64_t len, uint64_t* out) -> absl::Status {
      host_copy.resize(len);
      if (absl::Status s =
              cuda(cudaMemcpyAsync(host_copy.data(), buf, len, cudaMemcpyDeviceToHost, main_.stream),
                   "checksum copy");
          !s.ok())
        return s;
      if (absl::Status s = WaitMain(absl::StrCat(who, ": checksum copy")); !s.ok()) return s;
      Checksum c;
      c.Update(host_copy.data(), host_copy.size());
      *out = c.Digest();
      return absl::OkStatus();
    };
    Confirm failure;  // the receiver's first failure (reported to its senders at the end)
    absl::Status failure_status;
    std::vector<uint64_t> digests(n, 0), got_digests(n, 0);
    for (int64_t round = 0;; ++round) {
      const std::string what = absl::StrCat(who, ": bucket ", round);
      std::vector<int64_t> len(n, 0);
      bool any = false;
      for (size_t i = 0; i < n; ++i) {
        len[i] = std::min(bucket, schedule.peers[i].bytes - moved[i]);
        any |= len[i] > 0;
      }
      if (!any) break;
      if (sending) {
        for (size_t i = 0; i < n; ++i)
          if (len[i] > 0 && rep[i] == i)
            if (absl::Status s = copy_runs(i, len[i], true); !s.ok()) return s;
        if (checksums) {
          for (size_t i = 0; i < n; ++i)
            if (len[i] > 0 && rep[i] == i)
              if (absl::Status s = digest(dev[i], len[i], &digests[i]); !s.ok()) return s;
          for (size_t i = 0; i < n; ++i) digests[i] = digests[rep[i]];
          if (absl::Status s = cuda(cudaMemcpyAsync(dev_digest, digests.data(), n * sizeof(uint64_t),
                                                    cudaMemcpyHostToDevice, main_.stream),
                                    "digest copy");
              !s.ok())
            return s;
        }
      }
      st = FromNccl(ncclGroupStart(), what);
      for (size_t i = 0; i < n && st.ok(); ++i) {
        if (len[i] == 0) continue;
        int peer = GlobalRank(schedule.peers[i].peer, !sending);
        if (!by_broadcast(i))  // broadcast pairs move below, on their group's communicator
          st = FromNccl(sending ? ncclSend(dev[i], len[i], ncclUint8, peer, main_.comm, main_.stream)
                                : ncclRecv(dev[i], len[i], ncclUint8, peer, main_.comm, main_.stream),
                        what);
        if (checksums && st.ok())
          st = FromNccl(
              sending ? ncclSend(dev_digest + i, sizeof(uint64_t), ncclUint8, peer, main_.comm, main_.stream)
                      : ncclRecv(dev_digest + i, sizeof(uint64_t), ncclUint8, peer, main_.comm, main_.stream),
              what);
      }
      if (absl::Status e = FromNccl(ncclGroupEnd(), what); st.ok()) st = e;
      if (st.ok() && !bcasts.empty()) st = Issued(main_.comm, what);
      for (auto it = bcasts.begin(); st.ok() && it != bcasts.end(); ++it) {
        const size_t i = it->second;
        if (len[i] == 0) continue;  // a group's pairs have the same length
        const CommStream& g = groups_.at(it->first);
        // On the main stream, after the point-to-point group and the earlier broadcasts: every
        // rank issues in the same (GroupId) order, so kernels that run one after another cannot
        // wait on each other in a cycle, which kernels of several communicators on concurrent
        // streams could (NCCL does not promise they all fit on the GPU at once). It also
        // orders the broadcast after the staging copy into dev[] on this stream.
        st = FromNccl(
            ncclBroadcast(dev[rep[i]], dev[rep[i]], len[i], ncclUint8, /*root=*/0, g.comm, main_.stream),
            what);
        if (st.ok()) st = Issued(g.comm, what);
      }
      if (st.ok()) st = Wait(pending, absl::StrCat(what, peers_text));
      if (!st.ok()) return st;
      if (!sending) {
        if (checksums)
          if (absl::Status s = cuda(
                  cudaMemcpy(got_digests.data(), dev_digest, n * sizeof(uint64_t), cudaMemcpyDeviceToHost),
                  "digest copy");
              !s.ok())
            return s;
        for (size_t i = 0; i < n; ++i) {
          if (len[i] == 0) continue;
          if (checksums && failure.code == 0) {
            uint64_t mine = 0;
            if (absl::Status s = digest(dev[i], len[i], &mine); !s.ok()) return s;
            if (mine != got_digests[i]) {
              failure = {static_cast<int32_t>(absl::StatusCode::kDataLoss), static_cast<int32_t>(round)};
              failure_status =
                  absl::DataLossError(absl::StrCat(who, ": bucket ", round, " from ", peer_name(i),
                                                   ": checksum mismatch (", len[i], " bytes)"));
            }
          }
          if (absl::Status s = copy_runs(i, len[i], false); !s.ok()) return s;
        }
        if (absl::Status s = WaitMain(what); !s.ok()) return s;
      }
      for (size_t i = 0; i < n; ++i) moved[i] += len[i];
    }

    // 4. Confirmation: receivers tell each sender whether they have every byte, verified.
    Confirm* dev_confirm = nullptr;
    if (absl::Status s = dev_alloc(n * sizeof(Confirm), reinterpret_cast<void**>(&dev_confirm)); !s.ok())
      return s;
    std::vector<Confirm> confirms(n, failure);
    if (!sending)
      if (absl::Status s = cuda(cudaMemcpyAsync(dev_confirm, confirms.data(), n * sizeof(Confirm),
                                                cudaMemcpyHostToDevice, main_.stream),
                                "confirmation copy");
          !s.ok())
        return s;
    const std::string confirmation = absl::StrCat(who, ": confirmation");
    st = FromNccl(ncclGroupStart(), confirmation);
    for (size_t i = 0; i < n && st.ok(); ++i) {
      int peer = GlobalRank(schedule.peers[i].peer, !sending);
      st = FromNccl(
          sending ? ncclRecv(dev_confirm + i, sizeof(Confirm), ncclUint8, peer, main_.comm, main_.stream)
                  : ncclSend(dev_confirm + i, sizeof(Confirm), ncclUint8, peer, main_.comm, main_.stream),
          confirmation);
    }
    if (absl::Status e = FromNccl(ncclGroupEnd(), confirmation); st.ok()) st = e;
    // Ranks finish their rounds at different times (a sender whose pairs end early waits for
    // receivers still taking other senders' buckets): this wait is bounded by sync_timeout.
    if (st.ok()) st = WaitMain(absl::StrCat(confirmation, peers_text), o_.transfer.sync_timeout);
    if (!st.ok()) return st;
    PruneGroups(bcasts);
    if (!sending) {
      reported = true;  // the senders know; the communicators stay usable
      return failure_status;
    }
    if (absl::Status s =
            cuda(cudaMemcpy(confirms.data(), dev_confirm, n * sizeof(Confirm), cudaMemcpyDeviceToHost),
                 "confirmation copy");
        !s.ok())
      return s;
    reported = true;
    for (size_t i = 0; i < n; ++i)
      if (confirms[i].code != 0)
        return absl::Status(
            static_cast<absl::StatusCode>(confirms[i].code),
            absl::StrCat(who, ": ", peer_name(i), " failed the sync",
                         confirms[i].bucket >= 0 ? absl::StrCat(" at bucket ", confirms[i].bucket) : "",
                         confirms[i].code == static_cast<int32_t>(absl::StatusCode::kDataLoss)
                             ? " (checksum mismatch)"
                             : ""));
    return absl::OkStatus();
  }

  const NcclOptions o_;
  CommStream main_;
  bool aborted_ = false;
  // Broadcast groups by (root's global rank, key), kept between syncs.
  std::map<GroupId, CommStream> groups_;
};

}  // namespace

std::vector<std::vector<size_t>> GroupIdenticalStreams(const RankSchedule& schedule) {
  std::vector<std::vector<size_t>> groups;
  for (size_t i = 0; i < schedule.peers.size(); ++i) {
    const PeerStream& p = schedule.peers[i];
    if (p.bytes == 0) continue;
    bool placed = false;
    for (std::vector<size_t>& g : groups) {
      const PeerStream& q = schedule.peers[g.front()];
      if (q.bytes == p.bytes && q.runs == p.runs) {
        g.push_back(i);
        placed = true;
        break;
      }
    }
    if (!placed) groups.push_back({i});
  }
  return groups;
}

absl::Status ValidateNcclOptions(const NcclOptions& o) {
  if (o.rendezvous == nullptr) return absl::InvalidArgumentError("nccl options: rendezvous is null");
  if (o.num_senders < 1 || o.num_receivers < 1)
    return absl::InvalidArgumentError("nccl options: num_senders and num_receivers must be >= 1");
  if (o.rank < 0 || o.rank >= (o.is_sender ? o.num_senders : o.num_receivers))
    return absl::InvalidArgumentError(absl::StrCat("nccl options: rank ", o.rank, " outside its side"));
  if (o.device < 0) return absl::InvalidArgumentError("nccl options: device must be >= 0");
  if (o.transfer.bucket_bytes <= 0)
    return absl::InvalidArgumentError("nccl options: transfer.bucket_bytes must be > 0");
  if (o.transfer.io_timeout <= absl::ZeroDuration())
    return absl::InvalidArgumentError("nccl options: transfer.io_timeout must be > 0");
  if (o.init_timeout < absl::ZeroDuration())
    return absl::InvalidArgumentError("nccl options: init_timeout must be >= 0 (0: transfer.io_timeout)");
  if (o.transfer.sync_timeout < o.transfer.io_timeout)
    return absl::InvalidArgumentError("nccl options: transfer.sync_timeout must be >= transfer.io_timeout");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Transport>> CreateNcclTransport(const NcclOptions& o) {
  if (absl::Status s = ValidateNcclOptions(o); !s.ok()) return s;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || o.device >= count)
    return absl::FailedPreconditionError(
        absl::StrCat("nccl: CUDA device ", o.device, " not available (",
                     e == cudaSuccess ? absl::StrCat(count, " devices") : cudaGetErrorName(e), ")"));
  if (absl::Status s = FromCuda(cudaSetDevice(o.device), "nccl: cudaSetDevice"); !s.ok()) return s;
  const int world = o.num_senders + o.num_receivers;
  const int global = o.is_sender ? o.rank : o.num_senders + o.rank;
  const std::string key = absl::StrCat(o.key_prefix, "/nccl_id/", o.generation);
  ncclUniqueId id;
  if (global == 0) {
    if (absl::Status s = FromNccl(ncclGetUniqueId(&id), "nccl: ncclGetUniqueId"); !s.ok()) return s;
    if (absl::Status s = o.rendezvous->Put(
            key, absl::BytesToHexString(absl::string_view(id.internal, sizeof id.internal)));
        !s.ok())
      return s;
  } else {
    absl::StatusOr<std::string> hex = o.rendezvous->Get(key, InitTimeout(o));
    if (!hex.ok()) return hex.status();
    std::string raw = absl::HexStringToBytes(*hex);
    if (raw.size() != sizeof id.internal)
      return absl::InvalidArgumentError(
          absl::StrCat("nccl: rendezvous key ", key, " holds ", raw.size(), " bytes"));
    std::memcpy(id.internal, raw.data(), sizeof id.internal);
  }
  cudaStream_t stream = nullptr;
  if (absl::Status s = FromCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "nccl: stream");
      !s.ok())
    return s;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  absl::Status s =
      FromNccl(ncclCommInitRankConfig(&comm, world, id, global, &config), "nccl: ncclCommInitRankConfig");
  if (s.ok())
    s = AwaitComm(comm, InitTimeout(o), absl::StrCat("nccl: communicator init of ", world, " ranks"));
  CommStream main{comm, stream};
  if (!s.ok()) {
    Release(main, /*abort=*/true);
    return s;
  }
  return std::unique_ptr<Transport>(new NcclTransport(o, main));
}

}  // namespace skyrl::weight_sync
