// A fast streaming 64-bit checksum for bucket verification (not cryptographic). The digest
// depends only on the bytes and their order, never on how Update calls cut them, so the
// sender (gathering from its runs) and the receiver (scattering into its runs) agree.
// Thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>

namespace skyrl::weight_sync {

class Checksum {
 public:
  void Update(const void* data, size_t n);
  uint64_t Digest() const;

 private:
  uint64_t lane_[4] = {0x243F6A8885A308D3ull, 0x13198A2E03707344ull, 0xA4093822299F31D0ull,
                       0x082EFA98EC4E6C89ull};
  uint8_t carry_[32];
  size_t carry_n_ = 0;
  uint64_t count_ = 0;
};

}  // namespace skyrl::weight_sync
