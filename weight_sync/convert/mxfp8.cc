#include "weight_sync/convert/mxfp8.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace skyrl::weight_sync {

float Bf16ToFloat(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

uint8_t FloatToE4M3(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f)) return sign | 0x7F;
  const float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7E;  // the largest finite value; E4M3FN has no infinity
  if (a < 0.015625f) {                  // below 2^-6: subnormals, steps of 2^-9
    // nearbyint rounds ties to even in the default rounding mode; 8 steps is 2^-6 = code 0x08.
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  int e;
  std::frexp(a, &e);  // a = fr * 2^e, fr in [0.5, 1)
  int exp = e - 1;    // a = (1 + m) * 2^exp
  int q = static_cast<int>(std::nearbyint((std::ldexp(a, -exp) - 1.0f) * 8.0f));
  if (q == 8) {
    q = 0;
    ++exp;
  }
  if (exp > 8 || (exp == 8 && q == 7)) return sign | 0x7E;
  return sign | static_cast<uint8_t>(((exp + 7) << 3) | q);
}

float E4M3ToFloat(uint8_t v) {
  const float sign = (v & 0x80) ? -1.0f : 1.0f;
  const int exp = (v >> 3) & 0xF, m = v & 7;
  if (exp == 15 && m == 7) return std::nanf("");
  if (exp == 0) return sign * std::ldexp(static_cast<float>(m), -9);
  return sign * std::ldexp(1.0f + m / 8.0f, exp - 7);
}

namespace {

// FloatToE4M3 of every bf16 value, by bit pattern (built once). Scaling a normal bf16 by a power
// of two only moves its exponent field, so a scaled element that stays normal is a lookup.
const uint8_t* E4M3OfBf16() {
  static const uint8_t* table = [] {
    auto* t = new uint8_t[65536];
    for (uint32_t b = 0; b < 65536; ++b) t[b] = FloatToE4M3(Bf16ToFloat(static_cast<uint16_t>(b)));
    return t;
  }();
  return table;
}

}  // namespace

absl::Status QuantizeMxfp8(absl::Span<const uint16_t> bf16, absl::Span<uint8_t> fp8,
                           absl::Span<uint8_t> scales) {
  const uint8_t* table = E4M3OfBf16();
  const size_t n = bf16.size(), blocks = (n + kMxBlock - 1) / kMxBlock;
  if (fp8.size() != n || scales.size() != blocks)
    return absl::InvalidArgumentError(absl::StrCat("mxfp8: ", n, " elements need ", n, " fp8 bytes and ",
                                                   blocks, " scales, got ", fp8.size(), " and ",
                                                   scales.size()));
  for (size_t b = 0; b < blocks; ++b) {
    const size_t lo = b * kMxBlock, hi = std::min(n, lo + kMxBlock);
    float amax = 0;
    for (size_t i = lo; i < hi; ++i) {
      float x = std::fabs(Bf16ToFloat(bf16[i]));
      if (std::isfinite(x) && x > amax) amax = x;
    }
    // Smallest power of two with amax / scale <= 448; E8M0 covers 2^-127 .. 2^127.
    int exp = amax > 0 ? static_cast<int>(std::ceil(std::log2(amax / 448.0f))) : -127;
    if (amax > 0 && std::ldexp(448.0f, exp - 1) >= amax) --exp;  // log2 rounding guard
    exp = std::max(-127, std::min(127, exp));
    scales[b] = static_cast<uint8_t>(exp + 127);
    for (size_t i = lo; i < hi; ++i) {
      const uint16_t b = bf16[i];
      const int e = (b >> 7) & 0xFF, scaled = e - exp;
      if (e != 0 && e != 0xFF && scaled > 0 && scaled < 0xFF)
        fp8[i] = table[(b & 0x807Fu) | (static_cast<uint32_t>(scaled) << 7)];
      else  // zero, subnormal, inf or NaN, or leaving the normal range: the arithmetic path
        fp8[i] = FloatToE4M3(std::ldexp(Bf16ToFloat(b), -exp));
    }
  }
  return absl::OkStatus();
}

absl::Status DequantizeMxfp8(absl::Span<const uint8_t> fp8, absl::Span<const uint8_t> scales,
                             absl::Span<float> out) {
  const size_t n = fp8.size(), blocks = (n + kMxBlock - 1) / kMxBlock;
  if (out.size() != n || scales.size() != blocks)
    return absl::InvalidArgumentError(absl::StrCat("mxfp8: ", n, " elements need ", n, " outputs and ",
                                                   blocks, " scales, got ", out.size(), " and ",
                                                   scales.size()));
  for (size_t i = 0; i < n; ++i) {
    const uint8_t s = scales[i / kMxBlock];
    if (s == 0xFF) {
      out[i] = std::nanf("");  // E8M0 NaN
      continue;
    }
    out[i] = std::ldexp(E4M3ToFloat(fp8[i]), static_cast<int>(s) - 127);
  }
  return absl::OkStatus();
}

}  // namespace skyrl::weight_sync
