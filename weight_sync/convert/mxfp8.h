// bf16 -> fp8 (OCP E4M3FN) with one power-of-two scale per 32 consecutive elements (MXFP8-style,
// scales stored as E8M0: a biased exponent byte), and back. For syncing bf16 trainer weights to
// fp8 rollout weights.
//
// Scale choice: 2^ceil(log2(amax / 448)) per block, so no element saturates (the OCP MX
// reference uses floor(log2(amax)) - 8, which can clip the largest values of a block by up to
// 12.5%; NVIDIA's MXFP8 recipe rounds up as we do). Elements round to nearest, ties to even.
// The relative error of an element is at most 2^-4 of its magnitude, or half a subnormal step
// (scale * 2^-10) for elements near zero. NaN stays NaN; +-inf saturate to +-448 * scale.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace skyrl::weight_sync {

inline constexpr int kMxBlock = 32;

float Bf16ToFloat(uint16_t b);
uint16_t FloatToBf16(float f);  // round to nearest even; NaN stays NaN
uint8_t FloatToE4M3(float f);   // round to nearest even, saturating at +-448
float E4M3ToFloat(uint8_t v);

// bf16 elements -> fp8 elements and ceil(n / 32) E8M0 scales. InvalidArgument when the spans'
// sizes disagree.
absl::Status QuantizeMxfp8(absl::Span<const uint16_t> bf16, absl::Span<uint8_t> fp8,
                           absl::Span<uint8_t> scales);
// And back, to float.
absl::Status DequantizeMxfp8(absl::Span<const uint8_t> fp8, absl::Span<const uint8_t> scales,
                             absl::Span<float> out);

}  // namespace skyrl::weight_sync
