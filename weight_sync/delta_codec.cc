#include "weight_sync/delta_codec.h"

#include <zstd.h>

#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace skyrl::weight_sync {
namespace {
// The sample that decides, before any work, that a delta does not pay: this many blocks of
// kSampleBlock bytes spread over the frame, and the share of zero bytes they must hold.
constexpr size_t kSampleBlocks = 256, kSampleBlock = 64;
constexpr double kMinZeroShare = 0.25;

// The packed form of n bytes: a bitmap of its whole 8-byte words (bit i: word i is not zero),
// the nonzero words in order, then the last n % 8 bytes as they are.
size_t BitmapBytes(size_t n) { return (n / 8 + 7) / 8; }
// (+ 8: the branch-free packer writes one word past the last it keeps.)
size_t MaxPackedBytes(size_t n) { return BitmapBytes(n) + n + 8; }

// Packs the XOR of a and b (b null: a itself).
size_t Pack(const uint8_t* a, const uint8_t* b, size_t n, uint8_t* out) {
  const size_t words = n / 8;
  uint8_t* bitmap = out;
  uint8_t* w = out + BitmapBytes(n);
  // Branch-free: every word is written, and kept (the cursor moves on) only when not zero.
  for (size_t i = 0; i < words; i += 8) {
    uint8_t bits = 0;
    for (size_t k = 0; k < 8 && i + k < words; ++k) {
      uint64_t v, u = 0;
      std::memcpy(&v, a + (i + k) * 8, 8);
      if (b != nullptr) std::memcpy(&u, b + (i + k) * 8, 8);
      v ^= u;
      std::memcpy(w, &v, 8);
      const bool keep = v != 0;
      bits |= uint8_t(keep) << k;
      w += size_t(keep) * 8;
    }
    bitmap[i / 8] = bits;
  }
  for (size_t i = words * 8; i < n; ++i) *w++ = a[i] ^ (b != nullptr ? b[i] : 0);
  return static_cast<size_t>(w - out);
}

// Whether the XOR of a and b at the sample's blocks (b null: a itself) has too few zero bytes.
bool SampleMostlyNonZero(const uint8_t* a, const uint8_t* b, size_t n) {
  if (n < kSampleBlocks * kSampleBlock * 4) return false;  // small: trying is cheap
  const size_t stride = n / kSampleBlocks;
  size_t zeros = 0;
  for (size_t blk = 0; blk < kSampleBlocks; ++blk)
    for (size_t i = blk * stride; i < blk * stride + kSampleBlock; ++i)
      zeros += (a[i] ^ (b != nullptr ? b[i] : 0)) == 0;
  return double(zeros) < kMinZeroShare * double(kSampleBlocks * kSampleBlock);
}

// Checks a packed form of n bytes: OK when its size is what its bitmap says.
absl::Status CheckPacked(const uint8_t* packed, size_t packed_n, size_t n) {
  const size_t words = n / 8, bitmap_n = BitmapBytes(n);
  if (packed_n < bitmap_n + n % 8)
    return absl::DataLossError(absl::StrCat("delta frame: ", packed_n, " packed bytes, too few for ", n));
  size_t set = 0, i = 0;
  for (; i + 8 <= bitmap_n; i += 8) {  // eight bytes at a time
    uint64_t v;
    std::memcpy(&v, packed + i, 8);
    set += static_cast<size_t>(std::popcount(v));
  }
  for (; i < bitmap_n; ++i) set += static_cast<size_t>(std::popcount(packed[i]));
  // (Bits past the last word must be clear.)
  if (words % 8 != 0 && (packed[bitmap_n - 1] >> (words % 8)) != 0)
    return absl::DataLossError("delta frame: its bitmap marks words past its end");
  if (packed_n != bitmap_n + set * 8 + n % 8)
    return absl::DataLossError(absl::StrCat("delta frame: ", packed_n, " packed bytes, its bitmap says ",
                                            bitmap_n + set * 8 + n % 8));
  return absl::OkStatus();
}

// dst ^= the packed XOR (checked), word by word where it is not zero.
void XorPacked(const uint8_t* packed, uint8_t* dst, size_t n) {
  const size_t words = n / 8, bitmap_n = BitmapBytes(n);
  const uint8_t* w = packed + bitmap_n;
  for (size_t b = 0; b < bitmap_n; ++b) {
    for (uint8_t bits = packed[b]; bits != 0; bits &= uint8_t(bits - 1)) {
      const size_t i = b * 8 + static_cast<size_t>(std::countr_zero(bits));
      uint64_t v, d;
      std::memcpy(&v, w, 8);
      std::memcpy(&d, dst + i * 8, 8);
      d ^= v;
      std::memcpy(dst + i * 8, &d, 8);
      w += 8;
    }
  }
  for (size_t i = words * 8; i < n; ++i) dst[i] ^= *w++;
}

}  // namespace

bool SparseEnough(const uint8_t* x, size_t n) {
  size_t zeros = 0;
  for (size_t i = 0; i < n; ++i) zeros += x[i] == 0;
  return double(zeros) >= kMinZeroShare * double(n);
}

void XorBytes(uint8_t* dst, const uint8_t* a, const uint8_t* b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    x ^= y;
    std::memcpy(dst + i, &x, 8);
  }
  for (; i < n; ++i) dst[i] = a[i] ^ b[i];
}

size_t MaxCompressedBytes(size_t n) { return ZSTD_compressBound(MaxPackedBytes(n)); }

struct DeltaEncoder::Context {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ~Context() { ZSTD_freeCCtx(cctx); }
};

DeltaEncoder::DeltaEncoder(int level) : ctx_(std::make_unique<Context>()), level_(level) {}
DeltaEncoder::~DeltaEncoder() = default;

std::optional<absl::Span<const uint8_t>> DeltaEncoder::Compress(const uint8_t* x, size_t n, size_t limit) {
  return CompressXor(x, nullptr, n, limit);
}

std::optional<absl::Span<const uint8_t>> DeltaEncoder::CompressXor(const uint8_t* current,
                                                                   const uint8_t* base, size_t n,
                                                                   size_t limit) {
  if (limit == 0 || SampleMostlyNonZero(current, base, n)) return std::nullopt;
  if (packed_capacity_ < MaxPackedBytes(n)) {
    packed_ = std::make_unique_for_overwrite<uint8_t[]>(MaxPackedBytes(n));
    packed_capacity_ = MaxPackedBytes(n);
  }
  return Zip(Pack(current, base, n, packed_.get()), limit);
}

std::optional<absl::Span<const uint8_t>> DeltaEncoder::Zip(size_t packed, size_t limit) {
  if (out_capacity_ < limit) {
    out_ = std::make_unique_for_overwrite<uint8_t[]>(limit);
    out_capacity_ = limit;
  }
  // A frame that would not fit `limit` fails with dstSize_tooSmall: it does not pay.
  const size_t size = ZSTD_compressCCtx(ctx_->cctx, out_.get(), limit, packed_.get(), packed, level_);
  if (ZSTD_isError(size)) return std::nullopt;
  return absl::Span<const uint8_t>(out_.get(), size);
}

struct DeltaDecoder::Context {
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  ~Context() { ZSTD_freeDCtx(dctx); }
};

DeltaDecoder::DeltaDecoder() : ctx_(std::make_unique<Context>()) {}
DeltaDecoder::~DeltaDecoder() = default;

absl::StatusOr<size_t> DeltaDecoder::Unzip(const uint8_t* wire, size_t wire_n, size_t n) {
  const unsigned long long content = ZSTD_getFrameContentSize(wire, wire_n);
  if (content == ZSTD_CONTENTSIZE_ERROR || content == ZSTD_CONTENTSIZE_UNKNOWN)
    return absl::DataLossError(
        absl::StrCat("delta frame of ", wire_n, " bytes: not a zstd frame that states its size"));
  if (content > MaxPackedBytes(n))
    return absl::DataLossError(
        absl::StrCat("delta frame says ", content, " packed bytes, at most ", MaxPackedBytes(n), " for ", n));
  if (packed_capacity_ < MaxPackedBytes(n)) {
    packed_ = std::make_unique_for_overwrite<uint8_t[]>(MaxPackedBytes(n));
    packed_capacity_ = MaxPackedBytes(n);
  }
  const size_t got =
      ZSTD_decompressDCtx(ctx_->dctx, packed_.get(), static_cast<size_t>(content), wire, wire_n);
  if (ZSTD_isError(got))
    return absl::DataLossError(absl::StrCat("delta frame of ", wire_n, " bytes: ", ZSTD_getErrorName(got)));
  if (got != content)
    return absl::DataLossError(absl::StrCat("delta frame gave ", got, " bytes, it says ", content));
  if (absl::Status s = CheckPacked(packed_.get(), got, n); !s.ok()) return s;
  return got;
}

absl::Status DeltaDecoder::Decompress(const uint8_t* wire, size_t wire_n, uint8_t* x, size_t n) {
  absl::StatusOr<size_t> packed = Unzip(wire, wire_n, n);
  if (!packed.ok()) return packed.status();
  std::memset(x, 0, n);
  XorPacked(packed_.get(), x, n);
  return absl::OkStatus();
}

absl::Status DeltaDecoder::Apply(const uint8_t* wire, size_t wire_n, const uint8_t* base, uint8_t* dst,
                                 size_t n) {
  absl::StatusOr<size_t> packed = Unzip(wire, wire_n, n);
  if (!packed.ok()) return packed.status();
  if (dst != base) std::memcpy(dst, base, n);
  XorPacked(packed_.get(), dst, n);
  return absl::OkStatus();
}

}  // namespace skyrl::weight_sync
