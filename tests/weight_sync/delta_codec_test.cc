#include "weight_sync/delta_codec.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace skyrl::weight_sync {
namespace {

std::vector<uint8_t> Random(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(DeltaCodecTest, ASparseXorCompressesAndComesBackExactly) {
  const size_t n = 1 << 20;
  std::vector<uint8_t> base = Random(n, 1), now = base;
  for (size_t i = 0; i < n; i += 97) now[i] ^= 0x21;  // about 1 % of the bytes change
  std::vector<uint8_t> x(n);
  XorBytes(x.data(), now.data(), base.data(), n);
  DeltaEncoder encoder;
  std::optional<absl::Span<const uint8_t>> frame = encoder.Compress(x.data(), n, n - n / 10);
  ASSERT_TRUE(frame.has_value());
  EXPECT_LT(frame->size(), n / 10) << "1 % changed: a small frame";
  std::vector<uint8_t> wire(frame->begin(), frame->end());
  DeltaDecoder decoder;
  std::vector<uint8_t> back(n, 0xCC);
  ASSERT_TRUE(decoder.Decompress(wire.data(), wire.size(), back.data(), n).ok());
  XorBytes(back.data(), back.data(), base.data(), n);
  EXPECT_EQ(back, now);
}

TEST(DeltaCodecTest, AChangeEverywhereDoesNotPay) {
  const size_t n = 1 << 20;
  std::vector<uint8_t> x = Random(n, 2);
  DeltaEncoder encoder;
  EXPECT_FALSE(encoder.Compress(x.data(), n, n - n / 10).has_value())
      << "random bytes: refused by the sample";
  // Small enough to skip the sample: zstd itself finds it does not fit the limit.
  EXPECT_FALSE(encoder.Compress(x.data(), 4096, 4096 - 409).has_value());
}

TEST(DeltaCodecTest, ACorruptOrMisSizedFrameIsDataLoss) {
  const size_t n = 64 << 10;
  std::vector<uint8_t> x(n, 0);
  x[5] = 1;
  DeltaEncoder encoder;
  std::optional<absl::Span<const uint8_t>> frame = encoder.Compress(x.data(), n, n);
  ASSERT_TRUE(frame.has_value());
  std::vector<uint8_t> wire(frame->begin(), frame->end());
  DeltaDecoder decoder;
  std::vector<uint8_t> out(n + 1);
  EXPECT_EQ(decoder.Decompress(wire.data(), wire.size(), out.data(), n + 1).code(),
            absl::StatusCode::kDataLoss)
      << "the frame says n bytes";
  std::vector<uint8_t> garbage(100, 0xEE);
  EXPECT_EQ(decoder.Decompress(garbage.data(), garbage.size(), out.data(), n).code(),
            absl::StatusCode::kDataLoss);
  std::vector<uint8_t> cut(wire.begin(), wire.end() - 3);
  EXPECT_EQ(decoder.Decompress(cut.data(), cut.size(), out.data(), n).code(), absl::StatusCode::kDataLoss);
  EXPECT_LE(wire.size(), MaxCompressedBytes(n));
}

}  // namespace
}  // namespace skyrl::weight_sync
