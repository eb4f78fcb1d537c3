#include "weight_sync/convert/fp8_model.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "weight_sync/convert/mxfp8.h"

namespace skyrl::weight_sync {

absl::StatusOr<Fp8Conversion> MakeFp8Conversion(const Model& trainer, const ParamFilter& convert) {
  Fp8Conversion c;
  c.model.num_layers = trainer.num_layers;
  c.model.num_experts = trainer.num_experts;
  for (int p = 0; p < static_cast<int>(trainer.params.size()); ++p) {
    const Param& src = trainer.params[p];
    if (!convert || !convert(src)) {
      c.model.params.push_back(src);
      c.source.push_back(p);
      c.kind.push_back(Fp8Conversion::Kind::kCopy);
      continue;
    }
    if (src.dtype != DType::kBF16 || src.shape.empty() || src.shape.back() % kMxBlock != 0)
      return absl::InvalidArgumentError(absl::StrCat("fp8 conversion: param '", src.name,
                                                     "' must be bf16 with a last dimension divisible by ",
                                                     kMxBlock));
    Param data = src;
    data.dtype = DType::kFP8E4M3;
    Param scales = src;
    scales.name = src.name + ".mx_scale";
    scales.dtype = DType::kU8;
    scales.shape.back() /= kMxBlock;
    // Split along the last dimension (row-parallel), a head's columns shrink with it: one scale
    // per 32 of them (0, splitting by rows, when a head is not whole blocks).
    if (scales.split_dim == static_cast<int>(scales.shape.size()) - 1)
      for (int64_t& h : scales.head_rows) h = h % kMxBlock == 0 ? h / kMxBlock : 0;
    c.model.params.push_back(data);
    c.source.push_back(p);
    c.kind.push_back(Fp8Conversion::Kind::kData);
    c.model.params.push_back(scales);
    c.source.push_back(p);
    c.kind.push_back(Fp8Conversion::Kind::kScales);
  }
  return c;
}

absl::Status ConvertShard(const Model& trainer, const Fp8Conversion& conv, const ShardLayout& from,
                          const ShardLayout& to, absl::Span<const uint8_t> in, absl::Span<uint8_t> out) {
  if (static_cast<int64_t>(in.size()) < from.Bytes() || static_cast<int64_t>(out.size()) < to.Bytes())
    return absl::InvalidArgumentError(absl::StrCat("fp8 conversion: buffers of ", in.size(), " and ",
                                                   out.size(), " bytes for shards of ", from.Bytes(), " and ",
                                                   to.Bytes()));
  std::vector<uint8_t> data, scales;
  for (const ShardLayout::Entry& e : to.entries()) {
    const int p = conv.source[e.param];
    const ShardLayout::Entry* src = from.Find(p);
    if (src == nullptr || src->boxes.size() != e.boxes.size())
      return absl::InvalidArgumentError(
          absl::StrCat("fp8 conversion: the two layouts disagree on param '", trainer.params[p].name, "'"));
    for (size_t i = 0; i < e.boxes.size(); ++i) {
      const Box& b = src->boxes[i];
      const uint8_t* sp = in.data() + src->offsets[i];
      uint8_t* dp = out.data() + e.offsets[i];
      if (conv.kind[e.param] == Fp8Conversion::Kind::kCopy) {
        std::memcpy(dp, sp, b.Volume());
        continue;
      }
      // Byte space of bf16: the last dimension counts 2 bytes per element.
      const int last = b.ndim - 1;
      if (b.lo[last] % (2 * kMxBlock) != 0 || b.hi[last] % (2 * kMxBlock) != 0)
        return absl::InvalidArgumentError(absl::StrCat("fp8 conversion: param '", trainer.params[p].name,
                                                       "': shard box ", b.DebugString(),
                                                       " cuts a 32-element block on the last dimension"));
      const int64_t n = b.Volume() / 2;
      const int64_t want = conv.kind[e.param] == Fp8Conversion::Kind::kData ? n : n / kMxBlock;
      if (e.boxes[i].Volume() != want)
        return absl::InvalidArgumentError(absl::StrCat("fp8 conversion: param '", trainer.params[p].name,
                                                       "': rollout box ", e.boxes[i].DebugString(),
                                                       " does not match trainer box ", b.DebugString()));
      std::vector<uint16_t> bf16(n);
      std::memcpy(bf16.data(), sp, n * 2);
      data.resize(n);
      scales.resize(n / kMxBlock);
      if (absl::Status s = QuantizeMxfp8(bf16, absl::MakeSpan(data), absl::MakeSpan(scales)); !s.ok())
        return s;
      if (conv.kind[e.param] == Fp8Conversion::Kind::kData)
        std::memcpy(dp, data.data(), n);
      else
        std::memcpy(dp, scales.data(), n / kMxBlock);
    }
  }
  return absl::OkStatus();
}

}  // namespace skyrl::weight_sync
