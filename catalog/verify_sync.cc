#include "catalog/verify_sync.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "catalog/sync_plan.h"
#include "weight_sync/convert/fp8_model.h"
#include "weight_sync/convert/mxfp8.h"
#include "weight_sync/plan/prepared_sync.h"
#include "weight_sync/rendezvous.h"
#include "weight_sync/tcp/tcp_transport.h"
#include "weight_sync/versioned_shard.h"

namespace skyrl::catalog {
namespace {

namespace ws = weight_sync;

constexpr uint8_t kSentinel = 0x5A;  // what an engine holds before a sync; filtered bytes keep it

int Scaled(int count, int layers, int total) {
  if (count <= 0) return 0;
  return std::max(1, static_cast<int>(static_cast<int64_t>(count) * layers / std::max(1, total)));
}

// Bytes of parameter `p` (index `index` of the trainer's model) at `version`: splitmix64 of
// (version, parameter, word), cheap enough to make again in every process that needs them; with
// `numbers`, finite normal bf16 values instead of raw bits (weights that get converted to fp8).
std::string Weights(const ws::Param& p, int index, uint64_t version, bool numbers) {
  std::string out(static_cast<size_t>(p.NumBytes()), '\0');
  uint64_t x = version * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(index) << 20);
  auto next = [&x] {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (size_t i = 0; i < out.size(); i += 8) {
    uint64_t z = next();
    // Four bf16 numbers: random sign and mantissa, exponent 120..127 (magnitudes 2^-7..2):
    // finite, normal, spread over several fp8 scales.
    if (numbers) z = (z & 0x807F807F807F807Full) | 0x3C003C003C003C00ull | ((z >> 7) & 0x0380038003800380ull);
    std::memcpy(out.data() + i, &z, std::min<size_t>(8, out.size() - i));
  }
  return out;
}

// What TP rank `t` of an engine (`e`: TP, pp 1, ep 1) holds of `p`, whose full row-major bytes
// are `full`, by vLLM's rules: whole expert groups in contiguous blocks over the ranks
// (kWholeOverAllRanks), else each fused block split along split_dim, by heads when the block
// has head rows (a head replicated over tp/heads ranks when there are fewer heads than ranks),
// else in equal parts. Empty when the rank holds none of it.
std::string ExpectedPiece(const ws::Param& p, int num_experts, const ws::ModelParallel& e, int t,
                          const std::string& full) {
  if (p.expert >= 0 && e.experts == ws::ExpertSharding::kWholeOverAllRanks) {
    const int per = num_experts / e.tp;
    return p.expert / per == t ? full : std::string();
  }
  if (p.split_dim < 0 || e.tp == 1) return full;
  const int d = p.split_dim;
  const int64_t esize = ws::ElementSize(p.dtype);
  int64_t outer = 1, inner = esize;
  for (int i = 0; i < d; ++i) outer *= p.shape[i];
  for (size_t i = d + 1; i < p.shape.size(); ++i) inner *= p.shape[i];
  const int64_t dim = p.shape[d];
  std::vector<int64_t> blocks = p.fused.empty() ? std::vector<int64_t>{dim} : p.fused;
  std::string out;
  int64_t block_start = 0;
  for (size_t b = 0; b < blocks.size(); ++b) {
    const int64_t size = blocks[b];
    const int64_t unit = b < p.head_rows.size() ? p.head_rows[b] : 0;
    int64_t lo = t * size / e.tp, hi = (t + 1) * size / e.tp;
    if (unit > 0) {
      const int64_t heads = size / unit;
      if (heads % e.tp != 0 && e.tp % heads == 0) {
        const int64_t head = t / (e.tp / heads);
        lo = head * unit;
        hi = lo + unit;
      }
    }
    for (int64_t o = 0; o < outer; ++o)
      out.append(full, static_cast<size_t>((o * dim + block_start + lo) * inner),
                 static_cast<size_t>((hi - lo) * inner));
    block_start += size;
  }
  return out;
}

std::string Describe(const Architecture& a, int64_t bytes) {
  const int layers = std::max(
      {a.attention.layers + a.linear_attention.layers + a.mamba.layers, a.ffn.layers + a.moe.layers});
  std::string s = absl::StrCat(layers, " layers, hidden ", a.hidden);
  if (a.moe.layers > 0) absl::StrAppend(&s, ", ", a.moe.experts, " experts");
  if (a.mtp_layers > 0) absl::StrAppend(&s, ", MTP");
  if (a.vision.layers > 0) absl::StrAppend(&s, ", vision");
  return absl::StrCat(s, absl::StrFormat(", %.1f MiB", bytes / 1048576.0));
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
}

// Everything the ranks' processes share (built before the fork).
struct Check {
  SyncSetup setup;    // the catalog's model (canonical), layouts and filter
  ws::Model trainer;  // what the trainer holds and the sync runs on (a test may corrupt it)
  // fp8 rollouts: the synced conversion of `trainer`, and the canonical one of setup.model (what
  // engines must hold, truth.params[i] made from setup.model.params[truth_conv->source[i]]).
  std::optional<ws::Fp8Conversion> conv, truth_conv;
  std::unique_ptr<ws::ShardMap> trainer_map;  // fp8: the trainer's bf16 shards
  std::unique_ptr<ws::PreparedSync> sync;     // over the engines' model (converted or not)
  std::vector<bool> converted;                // per trainer parameter
  VerifyOptions options;

  const ws::Model& Truth() const { return truth_conv ? truth_conv->model : setup.model; }
  std::string TrainerWeights(int p, uint64_t v) const {
    return Weights(trainer.params[p], p, v, converted[p]);
  }
  // What engine TP rank `t` must hold of truth parameter `p` at version `v`: its piece of the
  // trainer's weights (ExpectedPiece), or for a converted weight the fp8 data or scales of its
  // bf16 piece. Blocks of 32 never cross a shard boundary, so that equals the slice of the whole
  // tensor converted at once; `cache` keeps the last conversion (data and scales come from one).
  struct Converted {
    int source = -1;
    uint64_t version = 0;
    std::string data, scales;
  };
  std::string Expected(int p, int t, uint64_t v, Converted& cache) const {
    const ws::Model& truth = Truth();
    const ws::Param& param = truth.params[p];
    const int src = truth_conv ? truth_conv->source[p] : p;
    const bool quantized = truth_conv && truth_conv->kind[p] != ws::Fp8Conversion::Kind::kCopy;
    if (!quantized)
      return ExpectedPiece(param, truth.num_experts, setup.engine, t,
                           Weights(setup.model.params[src], src, v, false));
    if (cache.source != src || cache.version != v) {
      const ws::Param& bf16_param = setup.model.params[src];
      const std::string piece =
          ExpectedPiece(bf16_param, truth.num_experts, setup.engine, t, Weights(bf16_param, src, v, true));
      const size_t n = piece.size() / 2;
      std::vector<uint16_t> bf16(n);
      std::memcpy(bf16.data(), piece.data(), piece.size());
      cache.data.assign(n, '\0');
      cache.scales.assign((n + ws::kMxBlock - 1) / ws::kMxBlock, '\0');
      (void)ws::QuantizeMxfp8(
          bf16, absl::MakeSpan(reinterpret_cast<uint8_t*>(cache.data.data()), cache.data.size()),
          absl::MakeSpan(reinterpret_cast<uint8_t*>(cache.scales.data()), cache.scales.size()));
      cache.source = src;
      cache.version = v;
    }
    return truth_conv->kind[p] == ws::Fp8Conversion::Kind::kData ? cache.data : cache.scales;
  }
};

// A rank's TCP transport options: loopback defaults, the check's timeouts; `receiver_rank` -1 for
// a sender.
ws::TcpOptions TcpFor(const Check& c, ws::Rendezvous& rendezvous, int receiver_rank) {
  ws::TcpOptions to;
  to.rendezvous = &rendezvous;
  to.receiver_rank = receiver_rank;
  to.transfer.io_timeout = c.options.io_timeout;
  to.transfer.sync_timeout = c.options.io_timeout * 2;
  return to;
}

// One sender's whole life in its process: its shard of each version, cut from the full weights
// by the plan's own layout (what a trainer holds), converted to fp8 where the rollouts are, sent.
// Exit status 0, or 1 with the error in `report`.
[[noreturn]] void SenderProcess(const Check& c, int rank, const std::string& dir, const std::string& report) {
  auto fail = [&](const absl::Status& s) {
    WriteFile(report, absl::StrCat("trainer rank ", rank, ": ", s.message()));
    _exit(1);
  };
  ws::FileRendezvous rendezvous(dir);
  auto transport = ws::CreateTcpTransport(TcpFor(c, rendezvous, /*receiver_rank=*/-1));
  if (!transport.ok()) fail(transport.status());
  auto layout = c.sync->SenderLayout(rank);  // of the engines' model
  auto schedule = c.sync->SenderSchedule(rank);
  if (!layout.ok()) fail(layout.status());
  if (!schedule.ok()) fail(schedule.status());
  const ws::ShardLayout held = c.conv ? ws::ShardLayout::Of(c.trainer, *c.trainer_map, rank) : *layout;
  std::vector<uint8_t> shard(held.Bytes()), converted(c.conv ? layout->Bytes() : 0);
  for (int v = 1; v <= c.options.versions; ++v) {
    std::vector<std::string> full(c.trainer.params.size());
    std::vector<absl::Span<const uint8_t>> spans(c.trainer.params.size());
    for (const ws::ShardLayout::Entry& e : held.entries()) {
      full[e.param] = c.TrainerWeights(e.param, v);
      spans[e.param] = {reinterpret_cast<const uint8_t*>(full[e.param].data()), full[e.param].size()};
    }
    ws::CutShard(c.trainer, held, spans, absl::MakeSpan(shard));
    absl::Span<const uint8_t> out = shard;
    if (c.conv) {
      if (absl::Status s =
              ws::ConvertShard(c.trainer, *c.conv, held, *layout, shard, absl::MakeSpan(converted));
          !s.ok())
        fail(s);
      out = converted;
    }
    if (absl::Status s = (*transport)->Send(v, *schedule, out); !s.ok()) fail(s);
  }
  _exit(0);
}

// One engine rank's life: receive each version, then check every byte against ExpectedPiece of
// the truth (the model as the catalog describes it, converted where the rollouts are fp8). Exit
// status 0, or 1 with what differs.
[[noreturn]] void ReceiverProcess(const Check& c, int rank, const std::string& dir,
                                  const std::string& report) {
  auto fail = [&](const std::string& why) {
    WriteFile(report, why);
    _exit(1);
  };
  ws::FileRendezvous rendezvous(dir);
  auto transport = ws::CreateTcpTransport(TcpFor(c, rendezvous, rank));
  if (!transport.ok()) fail(std::string(transport.status().message()));
  auto schedule = c.sync->ReceiverSchedule(rank);
  if (!schedule.ok()) fail(std::string(schedule.status().message()));
  ws::VersionedShard shard(schedule->shard_bytes);
  if (absl::Status s = shard.Load(0, std::vector<uint8_t>(schedule->shard_bytes, kSentinel)); !s.ok())
    fail(std::string(s.message()));
  const ws::Model& truth = c.Truth();
  const int t = rank % c.setup.engine.tp;
  for (int v = 1; v <= c.options.versions; ++v) {
    if (absl::Status s = (*transport)->Receive(v, *schedule, shard); !s.ok())
      fail(absl::StrCat("engine rank ", rank, ", version ", v, ": ", s.message()));
    const ws::VersionedShard::Snapshot got = shard.Current();
    const absl::Span<const uint8_t> bytes = got.bytes->span();
    int64_t at = 0;
    Check::Converted cache;
    for (size_t p = 0; p < truth.params.size(); ++p) {
      const ws::Param& param = truth.params[p];
      if (param.expert >= 0 && c.setup.engine.experts == ws::ExpertSharding::kWholeOverAllRanks &&
          param.expert / (truth.num_experts / c.setup.engine.tp) != t)
        continue;  // another rank's experts: no need to make their weights
      std::string want = c.Expected(static_cast<int>(p), t, v, cache);
      if (want.empty()) continue;
      if (!c.setup.filter(param)) want.assign(want.size(), static_cast<char>(kSentinel));
      const bool fits = at + static_cast<int64_t>(want.size()) <= static_cast<int64_t>(bytes.size());
      if (!fits || std::memcmp(bytes.data() + at, want.data(), want.size()) != 0) {
        fail(absl::StrCat("engine rank ", rank, ", version ", v, ": ", param.name, "\n",
                          c.setup.filter(param)
                              ? "its bytes differ from the engines' layout of the full model"
                              : "it arrived although the sync leaves it out"));
      }
      at += static_cast<int64_t>(want.size());
    }
    if (at != static_cast<int64_t>(bytes.size()))
      fail(absl::StrCat("engine rank ", rank, ": holds ", bytes.size(), " bytes, the engines' layout gives ",
                        at));
  }
  _exit(0);
}

// The weights vLLM quantizes for fp8 rollouts: bf16 matrices of the mixers, FFNs and experts
// (last dimension a multiple of 32), not embeddings, the LM head, norms, routers, adapters, MTP
// or vision.
bool QuantizedForFp8Rollouts(const ws::Param& p) {
  const std::string& n = p.name;
  auto has = [&n](const char* s) { return n.find(s) != std::string::npos; };
  return p.dtype == ws::DType::kBF16 && p.shape.size() >= 2 && p.shape.back() % ws::kMxBlock == 0 &&
         n.size() > 7 && n.compare(n.size() - 7, 7, ".weight") == 0 && !has("embed") && !has("lm_head") &&
         !has("norm") && !has(".gate.weight") && !has("lora_") && n.rfind("mtp.", 0) != 0 &&
         n.rfind("visual.", 0) != 0;
}

}  // namespace

Architecture ScaleDown(const Architecture& a, const Plan& plan) {
  const TrainerShape& t = plan.trainer.shape;
  const GeneratorPlan& g = plan.generator;
  const int tp = std::lcm(t.backend == "fsdp" ? 1 : std::max(1, t.tp), std::max(1, g.tp));
  Architecture s = a;
  s.hidden = 128;
  s.vocab = 512;
  const int mixers = a.attention.layers + a.linear_attention.layers + a.mamba.layers;
  const int ffns = a.ffn.layers + a.moe.layers;
  const int total = std::max(mixers, ffns);
  const int layers = std::min(total, std::max(4, t.pp));
  s.attention.layers = Scaled(a.attention.layers, layers, total);
  s.linear_attention.layers = Scaled(a.linear_attention.layers, layers, total);
  s.mamba.layers = Scaled(a.mamba.layers, layers, total);
  s.ffn.layers = Scaled(a.ffn.layers, layers, total);
  s.moe.layers = Scaled(a.moe.layers, layers, total);
  // Keep at least the pipeline's stages worth of layers on both kinds of block.
  auto pad = [&](int& main, int got) {
    if (got < std::max(1, t.pp) && main > 0) main += std::max(1, t.pp) - got;
  };
  pad(s.attention.layers > 0 ? s.attention.layers : s.mamba.layers,
      s.attention.layers + s.linear_attention.layers + s.mamba.layers);
  pad(s.moe.layers > 0 ? s.moe.layers : s.ffn.layers, s.ffn.layers + s.moe.layers);
  s.attention.head_dim = 32;
  if (a.attention.kind == AttentionKind::kMla) {
    s.attention.q_lora_rank = a.attention.q_lora_rank > 0 ? 64 : 0;
    s.attention.kv_lora_rank = 64;
    s.attention.qk_nope_dim = 32;
    s.attention.qk_rope_dim = 32;
    s.attention.v_head_dim = 32;
  }
  s.linear_attention.head_dim = 32;
  if (a.mamba.layers > 0) {
    s.mamba.d_inner = std::max(1, a.mamba.heads) * 32;
    s.mamba.state = 16;
  }
  s.ffn.size = 32 * tp;
  if (a.moe.layers > 0) {
    s.moe.expert_size = 32 * tp;
    s.moe.shared_size = a.moe.shared_size > 0 ? 32 * tp : 0;
    // The fewest experts (at least 4) that the trainer's expert spread divides and that the
    // engines' TP divides exactly when it divides the real count (so experts shard alike).
    const int spread = std::max(1, t.ep);
    const bool engine_whole = a.moe.experts % std::max(1, g.tp) == 0;
    for (int n = spread; n <= 4096; n += spread) {
      if (n >= 4 && (n % std::max(1, g.tp) == 0) == engine_whole && (a.moe.experts % n == 0 || n >= 8)) {
        s.moe.experts = n;
        break;
      }
    }
    s.moe.active = std::min(s.moe.active, s.moe.experts);
  }
  s.mtp_layers = std::min(a.mtp_layers, 1);
  if (a.vision.layers > 0) {
    s.vision.layers = 1;
    s.vision.hidden = 64;
    s.vision.ffn = 128;
    s.vision.out_hidden = static_cast<int>(s.hidden);
  }
  return s;
}

absl::StatusOr<VerifyResult> VerifyWeightSync(const Plan& plan, const VerifyOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const Architecture arch = ScaleDown(plan.model->arch, plan);
  absl::StatusOr<SyncSetup> setup = MakeSyncSetup(plan, arch);
  if (!setup.ok()) return setup.status();
  Check c;
  c.options = o;
  c.setup = std::move(*setup);
  c.trainer = c.setup.model;
  if (o.corrupt) o.corrupt(c.trainer);
  ws::Model engines_model = c.trainer;
  // fp8 rollouts convert on the trainer side; an FSDP trainer's flat shards cut the 32-element
  // blocks (weight_sync refuses them), so its bf16 goes and the engines quantize on arrival.
  const bool fp8 = plan.generator.precision.name == "fp8" && plan.trainer.shape.backend != "fsdp";
  c.converted.assign(c.trainer.params.size(), false);
  if (fp8) {
    absl::StatusOr<ws::Fp8Conversion> conv = ws::MakeFp8Conversion(c.trainer, QuantizedForFp8Rollouts);
    absl::StatusOr<ws::Fp8Conversion> truth = ws::MakeFp8Conversion(c.setup.model, QuantizedForFp8Rollouts);
    if (!conv.ok()) return conv.status();
    if (!truth.ok()) return truth.status();
    for (size_t i = 0; i < conv->source.size(); ++i)
      if (conv->kind[i] != ws::Fp8Conversion::Kind::kCopy) c.converted[conv->source[i]] = true;
    engines_model = conv->model;
    c.conv = std::move(*conv);
    c.truth_conv = std::move(*truth);
    absl::StatusOr<ws::ShardMap> map = ws::ShardMap::Build(c.trainer, c.setup.senders);
    if (!map.ok()) return map.status();
    c.trainer_map = std::make_unique<ws::ShardMap>(std::move(*map));
  }
  ws::PlanOptions po;
  po.filter = c.setup.filter;
  absl::StatusOr<std::unique_ptr<ws::PreparedSync>> sync =
      ws::PreparedSync::Make(engines_model, c.setup.senders, c.setup.receivers, po);
  if (!sync.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("weight-sync layouts of the scaled model: ", sync.status().message()));
  c.sync = std::move(*sync);

  VerifyResult r;
  r.senders = c.sync->num_senders();
  r.receivers = c.sync->num_receivers();
  r.scaled = Describe(arch, c.setup.model.TotalBytes());
  if (fp8) absl::StrAppend(&r.scaled, ", fp8 rollouts");
  if (!fp8 && plan.generator.precision.name == "fp8")
    absl::StrAppend(&r.scaled, ", bf16 to fp8 engines (FSDP)");
  r.params = static_cast<int>(c.Truth().params.size());
  for (const ws::Param& p : c.Truth().params) r.synced_params += c.setup.filter(p) ? 1 : 0;
  r.synced_bytes = c.sync->plan().total_bytes;
  r.versions = o.versions;

  char tmpl[] = "/tmp/skyrl-verify-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("verify: cannot make a temporary directory");
  const std::string dir = tmpl;
  absl::Cleanup remove_dir = [&] { std::filesystem::remove_all(dir); };
  std::vector<pid_t> kids;
  std::vector<std::string> reports, who;
  auto spawn = [&](bool sender, int rank) {
    const std::string report = absl::StrCat(dir, "/", sender ? "trainer-" : "engine-", rank, ".report");
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      if (sender) SenderProcess(c, rank, dir, report);
      ReceiverProcess(c, rank, dir, report);
    }
    kids.push_back(pid);
    reports.push_back(report);
    who.push_back(absl::StrCat(sender ? "trainer rank " : "engine rank ", rank));
  };
  // Trainer ranks first: when one fails, its report (the cause) comes before the engines'
  // timeouts waiting for it.
  for (int i = 0; i < r.senders; ++i) spawn(true, i);
  for (int i = 0; i < r.receivers; ++i) spawn(false, i);

  // Every rank's status, within 4 I/O timeouts; stragglers are killed and reported.
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoSeconds(o.io_timeout * 4);
  std::vector<int> status(kids.size(), -1);
  size_t left = kids.size();
  while (left > 0) {
    for (size_t i = 0; i < kids.size(); ++i) {
      if (status[i] != -1 || kids[i] <= 0) continue;
      int st = 0;
      if (waitpid(kids[i], &st, WNOHANG) == kids[i]) {
        status[i] = st;
        --left;
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < kids.size(); ++i)
        if (status[i] == -1 && kids[i] > 0) {
          kill(kids[i], SIGKILL);
          waitpid(kids[i], nullptr, 0);
          status[i] = -2;
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // The first engine's report says what differs; else the first failure of any rank.
  for (size_t i = 0; i < kids.size(); ++i) {
    if (status[i] == 0) continue;
    std::ifstream f(reports[i]);
    std::stringstream text;
    text << f.rdbuf();
    std::string why = text.str();
    if (status[i] == -2)
      why = absl::StrCat(who[i], ": no result within ", absl::FormatDuration(o.io_timeout * 4));
    if (why.empty()) why = absl::StrCat(who[i], ": exited with status ", status[i]);
    const size_t nl = why.find('\n');
    const bool names_param = nl != std::string::npos;
    if (r.failure.empty() || (names_param && r.failed_param.empty())) {
      if (names_param) {
        const std::string head = why.substr(0, nl);
        r.failed_param = head.substr(head.rfind(": ") + 2);
        why = absl::StrCat(head, ": ", why.substr(nl + 1));
      }
      r.failure = why;
    }
  }
  r.verified = r.failure.empty();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::string FormatVerifyResult(const VerifyResult& r) {
  if (!r.verified) return absl::StrCat("weights NOT verified: ", r.failure);
  return absl::StrFormat(
      "weights verified: %d trainer rank%s -> %d engine rank%s over TCP, each its own process; %d versions "
      "of "
      "the model scaled down (%s), %d of %d parameters synced (%.2f MiB per version), every engine byte "
      "checked, in %.1f s",
      r.senders, r.senders == 1 ? "" : "s", r.receivers, r.receivers == 1 ? "" : "s", r.versions, r.scaled,
      r.synced_params, r.params, r.synced_bytes / 1048576.0, r.seconds);
}

RowCheck CheckRow(const Catalog& catalog, const Row& row) {
  RowCheck c;
  c.family = row.family;
  c.table = row.table;
  c.model = row.reference.model;
  c.mode = std::string(ModeName(row.reference.mode));
  const ModelEntry* m = nullptr;
  for (const ModelEntry& e : row.models)
    if (e.name == row.reference.model) m = &e;
  if (m == nullptr) {
    c.plan_error = absl::StrCat("reference model ", row.reference.model, " is not among the row's models");
    return c;
  }
  const Cluster min = StatedMinimum(catalog, row);
  c.minimum = min.shape.ToString();
  PlanRequest opts;
  UseReferenceRecipe(row, &opts.assumptions);
  absl::StatusOr<Plan> at = PlanOn(catalog, row, *m, row.reference.mode, min, row.reference.placement, opts);
  c.plans_at_minimum = at.ok();
  if (!at.ok()) c.plan_error = std::string(at.status().message());
  // "Refused below": one step below the stated minimum, or below the model's own minimum when
  // the table's is conservative.
  Cluster floor = min;
  if (row.reference.conservative_minimum) {
    std::optional<HardwareSpec> own =
        MinimumHardware(catalog, row, *m, row.reference.mode, min.gpu, row.reference.placement, opts);
    if (own) floor.shape = *own;
  }
  std::vector<Cluster> below = BelowMinimum(catalog, floor);
  c.refused_below = !below.empty();
  std::vector<std::string> tried;
  for (const Cluster& b : below) {
    absl::StatusOr<Plan> p = PlanOn(catalog, row, *m, row.reference.mode, b, row.reference.placement, opts);
    c.refused_below = c.refused_below && absl::IsResourceExhausted(p.status());
    tried.push_back(absl::StrCat(b.shape.ToString(), p.ok() ? " (plans)" : ""));
  }
  c.below = below.empty() ? "no smaller cluster" : absl::StrJoin(tried, ", ");
  if (!at.ok()) {
    c.weights = "no plan at the minimum to check";
    return c;
  }
  absl::StatusOr<VerifyResult> v = VerifyWeightSync(*at);
  if (!v.ok()) {
    c.weights = std::string(v.status().message());
    return c;
  }
  c.weights_verified = v->verified;
  c.weights = FormatVerifyResult(*v);
  return c;
}

std::string RenderRowChecks(const std::vector<RowCheck>& rows) {
  std::string out =
      absl::StrFormat("%-28s %-6s %-28s %-5s %-10s %-17s %-14s %s\n", "row", "table", "reference", "mode",
                      "minimum", "plans at minimum", "refused below", "weights");
  std::string failures;
  for (const RowCheck& c : rows) {
    absl::StrAppend(&out, absl::StrFormat("%-28s %-6s %-28s %-5s %-10s %-17s %-14s %s\n", c.family, c.table,
                                          c.model, c.mode, c.minimum, c.plans_at_minimum ? "yes" : "NO",
                                          c.refused_below ? "yes" : "NO",
                                          c.weights_verified ? "verified" : "NOT verified"));
    if (!c.plans_at_minimum)
      absl::StrAppend(&failures, c.family, ": does not plan at ", c.minimum, ": ", c.plan_error, "\n");
    if (!c.refused_below) absl::StrAppend(&failures, c.family, ": not refused below (tried ", c.below, ")\n");
    if (!c.weights_verified) absl::StrAppend(&failures, c.family, ": ", c.weights, "\n");
  }
  if (!failures.empty()) absl::StrAppend(&out, "\n", failures);
  return out;
}

}  // namespace skyrl::catalog
