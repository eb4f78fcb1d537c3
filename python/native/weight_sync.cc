// skyrl_runtime._native.weight_sync: weight sync for Python, a thin pybind11 layer over weight_sync/
// (the planner, PreparedSync, the TCP transport, VersionedShard, fp8 conversion, the head-KV
// and file rendezvous). Python describes the model and the layouts and hands over tensor memory
// as addresses; planning, transfers, checksums, versions and conversion run here, without the
// GIL. skyrl_runtime/weight_sync.py is the public API over it.
//
// Errors: absl::Status becomes skyrl_runtime._native.Error(code, message), as in _native.
#include "python/native/weight_sync.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "python/native/edge.h"
#include "weight_sync/convert/fp8_model.h"
#include "weight_sync/kv_rendezvous.h"
#ifdef SKYRL_HAVE_NCCL
#include <cuda_runtime_api.h>

#include "weight_sync/nccl/nccl_transport.h"
#endif
#include "weight_sync/plan/prepared_sync.h"
#include "weight_sync/rendezvous.h"
#include "weight_sync/shard_bytes.h"
#include "weight_sync/tcp/tcp_transport.h"
#include "weight_sync/versioned_shard.h"

namespace py = pybind11;
namespace ws = skyrl::weight_sync;

namespace skyrl::python {
namespace {

// A shard's bytes lent to Python through the buffer protocol (writable): torch.frombuffer views
// into it keep it alive.
struct Buffer {
  std::shared_ptr<ws::ShardBytes> bytes;
};

// Copies between a buffer and tensors' memory given as addresses (the caller's tensors, which
// it keeps alive and checked for size and contiguity). Every range of the buffer is checked
// here; OutOfRange names the copy. Runs without the GIL.
void CopyRuns(Buffer& b, const std::vector<int64_t>& offsets, const std::vector<uintptr_t>& addresses,
              const std::vector<int64_t>& sizes, bool into_buffer) {
  if (offsets.size() != addresses.size() || offsets.size() != sizes.size())
    Raise(absl::InvalidArgumentError("offsets, addresses and sizes differ in length"));
  const int64_t limit = static_cast<int64_t>(b.bytes->size());
  for (size_t i = 0; i < offsets.size(); ++i)
    if (offsets[i] < 0 || sizes[i] < 0 || offsets[i] > limit - sizes[i] ||
        (sizes[i] > 0 && addresses[i] == 0))
      Raise(absl::OutOfRangeError(absl::StrCat("copy #", i, ": [", offsets[i], ", +", sizes[i],
                                               ") is outside the shard of ", limit, " bytes")));
  py::gil_scoped_release release;
  for (size_t i = 0; i < offsets.size(); ++i) {
    void* mem = reinterpret_cast<void*>(addresses[i]);
    uint8_t* at = b.bytes->data() + offsets[i];
    if (into_buffer)
      std::memcpy(at, mem, static_cast<size_t>(sizes[i]));
    else
      std::memcpy(mem, at, static_cast<size_t>(sizes[i]));
  }
}

// ---- the plan ----

ws::Model ModelFrom(const py::list& params, int num_layers, int num_experts) {
  ws::Model m;
  m.num_layers = num_layers;
  m.num_experts = num_experts;
  for (py::handle h : params) {
    py::dict d = py::reinterpret_borrow<py::dict>(h);
    ws::Param p;
    p.name = d["name"].cast<std::string>();
    p.shape = d["shape"].cast<std::vector<int64_t>>();
    auto dtype = ws::ParseDType(d["dtype"].cast<std::string>());
    if (!dtype.ok())
      Raise(absl::InvalidArgumentError(absl::StrCat("param '", p.name, "': ", dtype.status().message())));
    p.dtype = *dtype;
    p.split_dim = d["split_dim"].cast<int>();
    p.fused = d["fused"].cast<std::vector<int64_t>>();
    p.head_rows = d["head_rows"].cast<std::vector<int64_t>>();
    p.layer = d["layer"].cast<int>();
    p.expert = d["expert"].cast<int>();
    m.params.push_back(std::move(p));
  }
  return m;
}

ws::Layout LayoutFrom(const py::list& groups, const char* side) {
  ws::Layout l;
  for (py::handle h : groups) {
    py::dict d = py::reinterpret_borrow<py::dict>(h);
    const std::string kind = d["kind"].cast<std::string>();
    if (kind == "fsdp") {
      l.groups.push_back(ws::Fsdp{d["shards"].cast<int>(), d["replicas"].cast<int>()});
    } else if (kind == "model_parallel") {
      ws::ModelParallel mp;
      mp.tp = d["tp"].cast<int>();
      mp.pp = d["pp"].cast<int>();
      mp.ep = d["ep"].cast<int>();
      mp.replicas = d["replicas"].cast<int>();
      mp.experts = d["experts_whole"].cast<bool>() ? ws::ExpertSharding::kWholeOverAllRanks
                                                   : ws::ExpertSharding::kEpThenTp;
      mp.stage_first_layer = d["stage_first_layer"].cast<std::vector<int>>();
      l.groups.push_back(mp);
    } else {
      Raise(absl::InvalidArgumentError(
          absl::StrCat(side, " layout: group kind '", kind, "' is not model_parallel or fsdp")));
    }
  }
  return l;
}

// Whether `rank` of `layout` is in an FSDP group (its pieces are flat ranges).
bool IsFsdpRank(const ws::Layout& layout, int rank) {
  for (const ws::LayoutGroup& g : layout.groups) {
    const int n = std::visit([](const auto& v) { return v.Ranks(); }, g);
    if (rank < n) return std::holds_alternative<ws::Fsdp>(g);
    rank -= n;
  }
  return false;
}

// What Python needs of one rank's shard buffer: per parameter it holds, where its bytes sit and
// the local tensor's shape: flat for an FSDP rank (a piece of the flat parameter); else the
// boxes stacked on dim 0 (a TP rank holds a fused [q_t; k_t; v_t] as one tensor), or flat when
// they do not stack.
py::list Entries(const ws::Model& model, const ws::ShardLayout& layout, bool flat) {
  py::list out;
  for (const ws::ShardLayout::Entry& e : layout.entries()) {
    const ws::Param& p = model.params[e.param];
    const int esize = ws::ElementSize(p.dtype);
    int64_t bytes = 0;
    for (const ws::Box& b : e.boxes) bytes += b.Volume();
    std::vector<int64_t> shape;
    const ws::Box& first = e.boxes.front();
    bool stack = !p.shape.empty() && !flat;
    for (const ws::Box& b : e.boxes)
      for (int d = 1; d < b.ndim && stack; ++d) stack = b.hi[d] - b.lo[d] == first.hi[d] - first.lo[d];
    if (p.shape.empty() && !flat) {
      // A scalar: [element size] in byte space, [] as a tensor.
    } else if (stack) {
      int64_t rows = 0;
      for (const ws::Box& b : e.boxes) rows += b.hi[0] - b.lo[0];
      shape.push_back(rows);
      for (int d = 1; d < first.ndim; ++d) shape.push_back(first.hi[d] - first.lo[d]);
      shape.back() /= esize;  // the last dimension is in bytes
    } else {
      shape.push_back(bytes / esize);
    }
    ws::DType dtype = p.dtype;
    if (flat) {
      // An FSDP cut falls on bytes, not elements: a piece that starts or ends inside an element
      // is lent as its bytes (u8).
      const ws::ByteShape full = ws::ByteShape::Of(p);
      int64_t start = 0, stride = 1;
      for (int d = full.ndim - 1; d >= 0; --d) {
        start += first.lo[d] * stride;
        stride *= full.dims[d];
      }
      if (start % esize != 0 || bytes % esize != 0) {
        dtype = ws::DType::kU8;
        shape = {bytes};
      }
    }
    py::dict d;
    d["name"] = p.name;
    d["param"] = e.param;
    d["offset"] = e.offsets.front();
    d["nbytes"] = bytes;
    d["shape"] = shape;
    d["dtype"] = std::string(ws::DTypeName(dtype));
    out.append(d);
  }
  return out;
}

class SyncPlan {
 public:
  SyncPlan(const py::list& params, int num_layers, int num_experts, const py::list& senders,
           const py::list& receivers, std::vector<std::string> exclude, bool lora_only,
           std::optional<std::vector<std::string>> keep, std::optional<std::vector<std::string>> fp8) {
    trainer_ = ModelFrom(params, num_layers, num_experts);
    Check(ws::ValidateModel(trainer_));
    senders_ = LayoutFrom(senders, "trainer");
    receivers_ = LayoutFrom(receivers, "engine");
    ws::Model synced = trainer_;
    if (fp8) {
      absl::flat_hash_set<std::string> names(fp8->begin(), fp8->end());
      fp8_ = Unwrap(
          ws::MakeFp8Conversion(trainer_, [names](const ws::Param& p) { return names.contains(p.name); }));
      synced = fp8_->model;
    }
    ws::PlanOptions o;
    std::optional<absl::flat_hash_set<std::string>> kept;
    if (keep) kept.emplace(keep->begin(), keep->end());
    o.filter = [drop = ws::ExcludeNames(std::move(exclude)), lora_only, kept](const ws::Param& p) {
      if (!drop(p)) return false;
      if (lora_only && !ws::LoraOnly()(p)) return false;
      return !kept || kept->contains(p.name);
    };
    prepared_ = Unwrap(ws::PreparedSync::Make(std::move(synced), senders_, receivers_, std::move(o)));
    if (fp8_) {
      trainer_map_ = std::make_unique<ws::ShardMap>(Unwrap(ws::ShardMap::Build(trainer_, senders_)));
    }
  }

  // The trainer-side layout of sender `rank` (the trainer model's, before any conversion).
  ws::ShardLayout TrainerLayout(int rank) const {
    if (rank < 0 || rank >= prepared_->num_senders())
      Raise(absl::OutOfRangeError(
          absl::StrCat("sender rank ", rank, " is outside 0..", prepared_->num_senders() - 1)));
    if (fp8_) return ws::ShardLayout::Of(trainer_, *trainer_map_, rank);
    return Unwrap(prepared_->SenderLayout(rank));
  }
  py::list SenderEntries(int rank) const {
    return Entries(trainer_, TrainerLayout(rank), IsFsdpRank(senders_, rank));
  }
  py::list ReceiverEntries(int rank) const {
    return Entries(prepared_->model(), Unwrap(prepared_->ReceiverLayout(rank)), IsFsdpRank(receivers_, rank));
  }
  py::dict Summary() const {
    const ws::Plan& p = prepared_->plan();
    py::dict d;
    d["senders"] = p.num_senders;
    d["receivers"] = p.num_receivers;
    d["transfers"] = p.transfers.size();
    d["bytes"] = p.total_bytes;
    d["predicted_s"] = p.predicted_s;
    d["lower_bound_s"] = p.lower_bound_s;
    absl::flat_hash_set<int> moved;
    for (const ws::Transfer& t : p.transfers) moved.insert(t.param);
    std::vector<std::string> names;
    for (int i = 0; i < static_cast<int>(prepared_->model().params.size()); ++i)
      if (moved.contains(i)) names.push_back(prepared_->model().params[i].name);
    d["synced"] = names;
    return d;
  }

  const ws::Model& trainer() const { return trainer_; }
  const std::optional<ws::Fp8Conversion>& fp8() const { return fp8_; }
  const ws::PreparedSync& prepared() const { return *prepared_; }

 private:
  ws::Model trainer_;
  ws::Layout senders_, receivers_;
  std::optional<ws::Fp8Conversion> fp8_;
  std::unique_ptr<ws::ShardMap> trainer_map_;  // fp8 only: the trainer model's shards
  std::unique_ptr<ws::PreparedSync> prepared_;
};

// How a rank reaches its peers, from Python's options dict: rendezvous ("kv" with the head's
// address and token, or "dir" with a directory), the key prefix, the transport ("tcp", or
// "nccl" in builds with NCCL, on CUDA device `device`), timeouts and checksums; receivers also
// bind_host, advertise_host and in_place.
struct Endpoint {
  std::string rendezvous, where, token, prefix, transport, bind_host, advertise_host;
  double io_timeout_s = 30;
  bool checksums = false, in_place = false, delta = false;
  int device = 0;

  static Endpoint From(const py::dict& d) {
    Endpoint e;
    e.rendezvous = d["rendezvous"].cast<std::string>();
    e.where = d["where"].cast<std::string>();
    e.token = d["token"].cast<std::string>();
    e.prefix = d["prefix"].cast<std::string>();
    e.transport = d["transport"].cast<std::string>();
    e.io_timeout_s = d["io_timeout"].cast<double>();
    e.checksums = d["checksums"].cast<bool>();
    e.device = d["device"].cast<int>();
    if (d.contains("bind_host")) e.bind_host = d["bind_host"].cast<std::string>();
    if (d.contains("advertise_host")) e.advertise_host = d["advertise_host"].cast<std::string>();
    if (d.contains("in_place")) e.in_place = d["in_place"].cast<bool>();
    if (d.contains("delta")) e.delta = d["delta"].cast<bool>();
    if (!(e.io_timeout_s > 0)) Raise(absl::InvalidArgumentError("io_timeout must be positive"));
    if (e.transport != "tcp" && e.transport != "nccl")
      Raise(absl::InvalidArgumentError(absl::StrCat("transport '", e.transport, "' is not tcp or nccl")));
    if (e.delta && e.transport != "tcp")
      Raise(absl::InvalidArgumentError(
          absl::StrCat("delta: transport ", e.transport, " sends every byte (tcp only)")));
#ifndef SKYRL_HAVE_NCCL
    if (e.transport == "nccl")
      Raise(absl::FailedPreconditionError(
          "transport nccl: this build has no NCCL (configure with CUDA and NCCL)"));
#endif
    return e;
  }

  std::unique_ptr<ws::Rendezvous> MakeRendezvous() const {
    if (rendezvous == "kv") return Unwrap(ws::KvRendezvous::Connect(where, token));
    if (rendezvous == "dir") return std::make_unique<ws::FileRendezvous>(where);
    Raise(absl::InvalidArgumentError(absl::StrCat("rendezvous kind '", rendezvous, "' is not kv or dir")));
  }

  ws::TransferOptions Transfer() const {
    ws::TransferOptions t;
    t.io_timeout = Seconds(io_timeout_s);  // sync_timeout stays the transports' (10 minutes)
    t.checksums = checksums;
    return t;
  }
};

// One rank's transport. TCP is made at once (a receiver listens and publishes its address from
// then on); Python senders copy into sockets rather than splice (zero_copy_send off), since
// their shard is live parameters that the next optimizer step rewrites even after a failed send.
//
// NCCL's creation is collective, so it is made at the first sync, when every rank is in one.
// After a failure every rank must make a new communicator, under a generation all of them agree
// on: a rank whose sync of version v fails publishes "<prefix>/nccl_generation" = v + 1 (every
// failing rank writes the same value), and each rank reads it at the start of every sync and
// makes its communicator again when it is newer than its own. The CUDA device of the calling
// thread is restored after each call (the transport sets its own).
class Link {
 public:
  Link(const Endpoint& e, const ws::Plan& plan, bool sender, int rank, ws::TransferOptions transfer)
      : e_(e),
        sender_(sender),
        rank_(rank),
        senders_(plan.num_senders),
        receivers_(plan.num_receivers),
        transfer_(transfer) {
    rendezvous_ = e_.MakeRendezvous();
    if (e_.transport == "tcp") {
      ws::TcpOptions o;
      o.rendezvous = rendezvous_.get();
      o.key_prefix = e_.prefix;
      o.transfer = transfer_;
      o.zero_copy_send = false;
      o.delta = e_.delta;
      o.stats = &stats_;
      if (!sender_) {
        o.receiver_rank = rank_;
        o.bind_host = e_.bind_host;
        o.advertise_host = e_.advertise_host;
      }
      transport_ = Unwrap(ws::CreateTcpTransport(o));
    }
  }
  bool nccl() const { return e_.transport == "nccl"; }
  // What this rank's TCP syncs sent as deltas, over all syncs (zeros for NCCL).
  py::dict DeltaStats() const {
    py::dict d;
    d["bytes"] = stats_.delta_bytes.load();
    d["wire_bytes"] = stats_.delta_wire_bytes.load();
    d["frames"] = stats_.delta_frames.load();
    d["raw_frames"] = stats_.delta_raw_frames.load();
    return d;
  }
  // Runs `fn(transport)` for the sync of `version` with the GIL released; raises its failure.
  template <typename Fn>
  void Run(uint64_t version, Fn&& fn) {
    absl::Status s;
    {
      py::gil_scoped_release release;
      if (nccl()) {
#ifdef SKYRL_HAVE_NCCL
        int device = -1;
        const bool had_device = cudaGetDevice(&device) == cudaSuccess;
        s = Ensure();
        if (s.ok()) s = fn(*transport_);
        if (!s.ok()) {
          transport_.reset();
          // Best effort: a peer that misses it fails its next sync and publishes it too.
          (void)rendezvous_->Put(GenerationKey(), absl::StrCat(version + 1));
        }
        if (had_device) cudaSetDevice(device);
#else
        s = absl::FailedPreconditionError("transport nccl: this build has no NCCL");
#endif
      } else {
        s = fn(*transport_);
      }
    }
    if (!s.ok()) Raise(s);
  }

 private:
  std::string GenerationKey() const { return absl::StrCat(e_.prefix, "/nccl_generation"); }

#ifdef SKYRL_HAVE_NCCL
  absl::Status Ensure() {
    uint64_t generation = 0;
    absl::StatusOr<std::string> published = rendezvous_->Get(GenerationKey(), absl::ZeroDuration());
    if (published.ok() && !absl::SimpleAtoi(*published, &generation))
      return absl::DataLossError(absl::StrCat(GenerationKey(), " holds '", *published, "', not a number"));
    if (transport_ && generation == generation_) return absl::OkStatus();
    transport_.reset();
    ws::NcclOptions o;
    o.rendezvous = rendezvous_.get();
    o.key_prefix = e_.prefix;
    o.num_senders = senders_;
    o.num_receivers = receivers_;
    o.is_sender = sender_;
    o.rank = rank_;
    o.device = e_.device;
    o.generation = generation;
    o.init_timeout = Seconds(std::max(e_.io_timeout_s, 60.0));
    o.transfer = transfer_;
    absl::StatusOr<std::unique_ptr<ws::Transport>> t = ws::CreateNcclTransport(o);
    if (!t.ok()) return t.status();
    transport_ = std::move(*t);
    generation_ = generation;
    return absl::OkStatus();
  }
#endif

  const Endpoint e_;
  const bool sender_;
  const int rank_, senders_, receivers_;
  const ws::TransferOptions transfer_;
  uint64_t generation_ = 0;
  ws::TcpStats stats_;                          // outlives the transport (declared before it)
  std::unique_ptr<ws::Rendezvous> rendezvous_;  // outlives the transport (declared before it)
  std::unique_ptr<ws::Transport> transport_;
};

class Sender {
 public:
  Sender(std::shared_ptr<SyncPlan> plan, int rank, const py::dict& endpoint)
      : plan_(std::move(plan)), layout_(plan_->TrainerLayout(rank)) {
    const Endpoint e = Endpoint::From(endpoint);
    schedule_ = Unwrap(plan_->prepared().SenderSchedule(rank));
    link_ = std::make_unique<Link>(e, plan_->prepared().plan(), /*sender=*/true, rank, e.Transfer());
    if (e.transport == "tcp")  // a CUDA sender's shard is a device tensor Python owns
      shard_ = std::make_shared<Buffer>(Buffer{ws::ShardBytes::Make(static_cast<size_t>(layout_.Bytes()))});
    if (plan_->fp8()) {
      if (e.transport != "tcp")
        Raise(absl::InvalidArgumentError(
            "fp8 conversion runs on the CPU: it needs CPU tensors (transport tcp)"));
      converted_layout_ = Unwrap(plan_->prepared().SenderLayout(rank));
      converted_ = ws::ShardBytes::Make(static_cast<size_t>(schedule_.shard_bytes));
    }
  }
  // The host shard (TCP), or None.
  py::object shard() const { return shard_ ? py::cast(shard_) : py::none(); }
  int64_t shard_bytes() const { return layout_.Bytes(); }
  // Sends the shard as `version` (converted to fp8 first when the plan says so): this object's
  // host shard, or `address` (device memory of shard_bytes() bytes, NCCL) when not 0.
  void Send(uint64_t version, uintptr_t address) {
    absl::Span<const uint8_t> bytes;
    if (link_->nccl() != (address != 0))
      Raise(absl::InvalidArgumentError("send: a shard address goes with transport nccl, and only with it"));
    if (address != 0)
      bytes = {reinterpret_cast<const uint8_t*>(address), static_cast<size_t>(layout_.Bytes())};
    else
      bytes = shard_->bytes->span();
    link_->Run(version, [&](ws::Transport& t) -> absl::Status {
      if (plan_->fp8()) {
        if (absl::Status s = ws::ConvertShard(plan_->trainer(), *plan_->fp8(), layout_, converted_layout_,
                                              bytes, converted_->span());
            !s.ok())
          return s;
        bytes = converted_->span();
      }
      return t.Send(version, schedule_, bytes);
    });
  }
  int64_t wire_bytes() const {
    int64_t n = 0;
    for (const ws::PeerStream& p : schedule_.peers) n += p.bytes;
    return n;
  }
  py::dict delta_stats() const { return link_->DeltaStats(); }

 private:
  std::shared_ptr<SyncPlan> plan_;
  ws::ShardLayout layout_;
  ws::RankSchedule schedule_;
  std::unique_ptr<Link> link_;
  std::shared_ptr<Buffer> shard_;
  ws::ShardLayout converted_layout_;  // fp8 only: the rollout model's layout of this rank
  std::shared_ptr<ws::ShardBytes> converted_;
};

class Receiver {
 public:
  Receiver(std::shared_ptr<SyncPlan> plan, int rank, const py::dict& endpoint) : plan_(std::move(plan)) {
    const Endpoint e = Endpoint::From(endpoint);
    schedule_ = Unwrap(plan_->prepared().ReceiverSchedule(rank));
    ws::TransferOptions t = e.Transfer();
    t.defer_commit = true;
    t.staging = e.in_place ? ws::Staging::kInPlace : ws::Staging::kCopy;
    link_ = std::make_unique<Link>(e, plan_->prepared().plan(), /*sender=*/false, rank, t);
    shard_ = std::make_unique<ws::VersionedShard>(schedule_.shard_bytes);
  }
  // Receives `version` into staging and leaves it prepared (every sender's bytes in, verified);
  // the caller commits or aborts. On failure the staging is already dropped.
  void Receive(uint64_t version) {
    link_->Run(version, [&](ws::Transport& t) { return t.Receive(version, schedule_, *shard_); });
  }
  // The prepared bytes (for copying into an engine's own tensors before Commit).
  std::shared_ptr<Buffer> Staged() const {
    std::shared_ptr<ws::ShardBytes> b = shard_->StagingBuffer();
    if (!b) Raise(absl::FailedPreconditionError("no version is staged"));
    return std::make_shared<Buffer>(Buffer{std::move(b)});
  }
  void Commit() { Check(shard_->Commit()); }
  void Abort() { shard_->Abort(); }
  // The live version's bytes, or None while nothing is served (a torn in-place shard).
  py::object Current() const {
    ws::VersionedShard::Snapshot s = shard_->Current();
    if (!s.bytes) return py::none();
    // Lent writable: the engine owns its weights (its kernels may transform them in place).
    auto bytes = std::const_pointer_cast<ws::ShardBytes>(s.bytes);
    return py::cast(std::make_shared<Buffer>(Buffer{std::move(bytes)}));
  }
  uint64_t version() const { return shard_->Current().version; }
  // Replaces the live version with a fresh buffer the caller fills (initial weights).
  std::shared_ptr<Buffer> NewBuffer() const {
    return std::make_shared<Buffer>(Buffer{ws::ShardBytes::Make(static_cast<size_t>(shard_->Bytes()))});
  }
  // Makes `b` (from new_buffer, filled by the caller) the live version, without a copy; the
  // caller keeps no other use of it.
  void Load(uint64_t version, const Buffer& b) { Check(shard_->Load(version, b.bytes)); }

 private:
  std::shared_ptr<SyncPlan> plan_;
  ws::RankSchedule schedule_;
  std::unique_ptr<ws::VersionedShard> shard_;  // outlives the transport (declared before it)
  std::unique_ptr<Link> link_;
};

}  // namespace
}  // namespace skyrl::python

namespace skyrl::python {

void BindWeightSync(py::module_& parent) {
  py::module_ m =
      parent.def_submodule("weight_sync", "SkyRL Runtime's weight sync, for skyrl_runtime.weight_sync");
#ifdef SKYRL_HAVE_NCCL
  m.attr("has_nccl") = true;
#else
  m.attr("has_nccl") = false;
#endif

  py::class_<Buffer, std::shared_ptr<Buffer>>(m, "Buffer", py::buffer_protocol())
      .def_buffer([](Buffer& b) {
        return py::buffer_info(b.bytes->data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {py::ssize_t(b.bytes->size())}, {py::ssize_t(1)}, /*readonly=*/false);
      })
      .def("__len__", [](const Buffer& b) { return b.bytes->size(); })
      .def("pack", [](Buffer& b, const std::vector<int64_t>& offsets, const std::vector<uintptr_t>& addresses,
                      const std::vector<int64_t>& sizes) { CopyRuns(b, offsets, addresses, sizes, true); })
      .def("unpack",
           [](Buffer& b, const std::vector<int64_t>& offsets, const std::vector<uintptr_t>& addresses,
              const std::vector<int64_t>& sizes) { CopyRuns(b, offsets, addresses, sizes, false); });

  py::class_<SyncPlan, std::shared_ptr<SyncPlan>>(m, "SyncPlan")
      .def(py::init<const py::list&, int, int, const py::list&, const py::list&, std::vector<std::string>,
                    bool, std::optional<std::vector<std::string>>, std::optional<std::vector<std::string>>>(),
           py::arg("params"), py::arg("num_layers"), py::arg("num_experts"), py::arg("senders"),
           py::arg("receivers"), py::arg("exclude"), py::arg("lora_only"), py::arg("keep"), py::arg("fp8"))
      .def("sender_entries", &SyncPlan::SenderEntries)
      .def("receiver_entries", &SyncPlan::ReceiverEntries)
      .def("summary", &SyncPlan::Summary);

  py::class_<Sender, std::shared_ptr<Sender>>(m, "Sender")
      .def(py::init<std::shared_ptr<SyncPlan>, int, const py::dict&>(), py::arg("plan"), py::arg("rank"),
           py::arg("endpoint"))
      .def("shard", &Sender::shard)
      .def_property_readonly("shard_bytes", &Sender::shard_bytes)
      .def("send", &Sender::Send, py::arg("version"), py::arg("address") = 0)
      .def_property_readonly("wire_bytes", &Sender::wire_bytes)
      .def_property_readonly("delta_stats", &Sender::delta_stats);

  py::class_<Receiver, std::shared_ptr<Receiver>>(m, "Receiver")
      .def(py::init<std::shared_ptr<SyncPlan>, int, const py::dict&>(), py::arg("plan"), py::arg("rank"),
           py::arg("endpoint"))
      .def("receive", &Receiver::Receive, py::arg("version"))
      .def("staged", &Receiver::Staged)
      .def("commit", &Receiver::Commit)
      .def("abort", &Receiver::Abort)
      .def("current", &Receiver::Current)
      .def("new_buffer", &Receiver::NewBuffer)
      .def("load", &Receiver::Load, py::arg("version"), py::arg("buffer"))
      .def_property_readonly("version", &Receiver::version);
}

}  // namespace skyrl::python
