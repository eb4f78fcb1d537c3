#include "weight_sync/checksum.h"

#include <cstring>

namespace skyrl::weight_sync {
namespace {

constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;

inline uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

inline void Block(uint64_t lane[4], const uint8_t* p) {
  // Four independent lanes so the multiplies overlap.
  for (int i = 0; i < 4; ++i) {
    uint64_t w;
    std::memcpy(&w, p + 8 * i, 8);
    lane[i] = Rotl(lane[i] ^ w, 31) * kMul;
  }
}

}  // namespace

void Checksum::Update(const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  count_ += n;
  if (carry_n_ > 0) {
    size_t take = n < 32 - carry_n_ ? n : 32 - carry_n_;
    std::memcpy(carry_ + carry_n_, p, take);
    carry_n_ += take;
    p += take;
    n -= take;
    if (carry_n_ < 32) return;
    Block(lane_, carry_);
    carry_n_ = 0;
  }
  while (n >= 32) {
    Block(lane_, p);
    p += 32;
    n -= 32;
  }
  std::memcpy(carry_, p, n);
  carry_n_ = n;
}

uint64_t Checksum::Digest() const {
  Checksum c = *this;
  uint8_t tail[32] = {0};
  std::memcpy(tail, c.carry_, c.carry_n_);
  uint64_t h = c.lane_[0] ^ Rotl(c.lane_[1], 7) ^ Rotl(c.lane_[2], 13) ^ Rotl(c.lane_[3], 19);
  for (int i = 0; i < 4; ++i) {
    uint64_t w;
    std::memcpy(&w, tail + 8 * i, 8);
    h = Rotl(h ^ w, 27) * kMul;
  }
  h ^= c.count_;
  h *= kMul;
  return h ^ (h >> 32);
}

}  // namespace skyrl::weight_sync
