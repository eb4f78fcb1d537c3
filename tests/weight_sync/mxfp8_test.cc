#include "weight_sync/convert/mxfp8.h"

#include <cmath>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace skyrl::weight_sync {
namespace {

TEST(E4M3Test, EveryCodeRoundTrips) {
  int finite = 0;
  for (int v = 0; v < 256; ++v) {
    float f = E4M3ToFloat(static_cast<uint8_t>(v));
    if (std::isnan(f)) {
      EXPECT_EQ(v & 0x7F, 0x7F) << v;
      continue;
    }
    ++finite;
    EXPECT_EQ(FloatToE4M3(f), v) << "code " << v << " value " << f;
  }
  EXPECT_EQ(finite, 254);
}

TEST(E4M3Test, KnownValuesAndRounding) {
  EXPECT_EQ(E4M3ToFloat(0x7E), 448.0f);
  EXPECT_EQ(E4M3ToFloat(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(E4M3ToFloat(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(FloatToE4M3(1.0f), 0x38);
  EXPECT_EQ(FloatToE4M3(-2.0f), 0xC0);
  EXPECT_EQ(FloatToE4M3(1e9f), 0x7E);  // saturates
  EXPECT_EQ(FloatToE4M3(-INFINITY), 0xFE);
  EXPECT_EQ(FloatToE4M3(1.0625f), 0x38);               // tie between 1 and 1.125: even (1)
  EXPECT_EQ(FloatToE4M3(1.1875f), 0x3A);               // tie between 1.125 and 1.25: even (1.25)
  EXPECT_EQ(FloatToE4M3(std::ldexp(1.5f, -9)), 0x02);  // subnormal tie 1.5 steps -> 2
}

TEST(Bf16Test, RoundsToNearestEven) {
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f)), 1.0f);
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), FloatToBf16(1.0f));  // tie -> even
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
}

TEST(Mxfp8Test, RoundTripErrorIsBoundedPerBlock) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 1);
  const int n = 32 * 500 + 7;  // a partial last block
  std::vector<uint16_t> in(n);
  for (int i = 0; i < n; ++i) {
    // Blocks span magnitudes from 2^-30 to 2^30, with outliers inside blocks.
    int block_exp = static_cast<int>((i / 32) % 61) - 30;
    float x = normal(rng) * std::ldexp(1.0f, block_exp);
    if (rng() % 50 == 0) x *= 100;
    in[i] = FloatToBf16(x);
  }
  std::vector<uint8_t> q(n), scales((n + 31) / 32);
  ASSERT_TRUE(QuantizeMxfp8(in, absl::MakeSpan(q), absl::MakeSpan(scales)).ok());
  std::vector<float> out(n);
  ASSERT_TRUE(DequantizeMxfp8(q, scales, absl::MakeSpan(out)).ok());
  double worst_rel = 0;
  for (int i = 0; i < n; ++i) {
    float x = Bf16ToFloat(in[i]);
    float scale = std::ldexp(1.0f, static_cast<int>(scales[i / 32]) - 127);
    float err = std::fabs(out[i] - x);
    ASSERT_LE(err, std::max(std::fabs(x) * 0.0625f, scale * std::ldexp(1.0f, -10)) * 1.0001f)
        << "element " << i << ": " << x << " -> " << out[i] << " (scale " << scale << ")";
    if (std::fabs(x) >= scale * std::ldexp(1.0f, -6))
      worst_rel = std::max<double>(worst_rel, err / std::fabs(x));
  }
  EXPECT_LE(worst_rel, 0.0625);
  EXPECT_GT(worst_rel, 0.01);  // fp8 really is lossy: the test would notice a no-op
  // The largest element of each block uses the top of the range without saturating.
  for (size_t b = 0; b < scales.size(); ++b) {
    int top = 0;
    for (size_t i = b * 32; i < std::min<size_t>(n, b * 32 + 32); ++i) top = std::max(top, q[i] & 0x7F);
    EXPECT_GE(top, 0x70) << "block " << b;  // amax/scale in (224, 448]
    EXPECT_LE(top, 0x7E) << "block " << b;
  }
}

// QuantizeMxfp8 looks most elements up by bit pattern; every bf16 value under scales from 2^-126
// to 2^127 must give what the arithmetic conversion of the scaled value gives.
TEST(Mxfp8Test, EveryBf16ValueUnderEveryKindOfScaleMatchesTheArithmeticPath) {
  for (float amax : {448.0f, 1.0f, 0x1p-100f, 0x1p100f, 3.0e38f}) {
    std::vector<uint16_t> in;
    for (uint32_t b = 0; b < 65536; ++b) {
      if (in.size() % kMxBlock == 0) in.push_back(FloatToBf16(amax));  // each block's largest element
      const float f = Bf16ToFloat(static_cast<uint16_t>(b));
      in.push_back(std::isfinite(f) && std::fabs(f) <= amax ? static_cast<uint16_t>(b) : 0);
    }
    while (in.size() % kMxBlock != 0) in.push_back(0);
    std::vector<uint8_t> fp8(in.size()), scales(in.size() / kMxBlock);
    ASSERT_TRUE(QuantizeMxfp8(in, absl::MakeSpan(fp8), absl::MakeSpan(scales)).ok());
    for (size_t i = 0; i < in.size(); ++i) {
      const int exp = static_cast<int>(scales[i / kMxBlock]) - 127;
      ASSERT_EQ(fp8[i], FloatToE4M3(std::ldexp(Bf16ToFloat(in[i]), -exp)))
          << "bf16 0x" << std::hex << in[i] << " under 2^" << std::dec << exp;
    }
  }
}

TEST(Mxfp8Test, ZerosExactValuesAndBadSizes) {
  std::vector<uint16_t> in(64, FloatToBf16(0.0f));
  in[40] = FloatToBf16(3.0f);
  in[41] = FloatToBf16(-0.375f);
  std::vector<uint8_t> q(64), s(2);
  ASSERT_TRUE(QuantizeMxfp8(in, absl::MakeSpan(q), absl::MakeSpan(s)).ok());
  std::vector<float> out(64);
  ASSERT_TRUE(DequantizeMxfp8(q, s, absl::MakeSpan(out)).ok());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], 0.0f);
  EXPECT_EQ(out[40], 3.0f);
  EXPECT_EQ(out[41], -0.375f);
  std::vector<uint8_t> short_scales(1);
  absl::Status bad = QuantizeMxfp8(in, absl::MakeSpan(q), absl::MakeSpan(short_scales));
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), ::testing::HasSubstr("2 scales"));
}

}  // namespace
}  // namespace skyrl::weight_sync
