// The bytes of one version of a receiver's shard (VersionedShard's buffers).
//
// Backed by a memfd (anonymous shared memory) where the kernel allows it, so that a sender on
// the same host can be handed the file descriptor and write a sync's bytes straight into the
// receiver's staging buffer (tcp/tcp_transport.h, "direct writes"); by private anonymous
// memory otherwise (fd() == -1). Either way it reads like a fixed-size byte array, zeroed at
// creation and allocated at once (as std::vector's zeroing did). The memfd is sealed against
// shrinking and growing, so a process that maps it can rely on its size (no SIGBUS from a
// truncation).
//
// Not copyable (CopyOf makes a copy); thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"

namespace skyrl::weight_sync {

class ShardBytes {
 public:
  // `bytes` zero bytes; shared memory unless `shareable` is false or memfd is unavailable.
  // Throws std::bad_alloc when no memory can be mapped at all, as std::vector would.
  static std::shared_ptr<ShardBytes> Make(size_t bytes, bool shareable = true);
  static std::shared_ptr<ShardBytes> CopyOf(absl::Span<const uint8_t> bytes, bool shareable = true);
  ~ShardBytes();
  ShardBytes(const ShardBytes&) = delete;
  ShardBytes& operator=(const ShardBytes&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  uint8_t& operator[](size_t i) { return data_[i]; }
  const uint8_t& operator[](size_t i) const { return data_[i]; }
  const uint8_t* begin() const { return data_; }
  const uint8_t* end() const { return data_ + size_; }
  absl::Span<uint8_t> span() { return {data_, size_}; }
  absl::Span<const uint8_t> span() const { return {data_, size_}; }
  std::vector<uint8_t> ToVector() const { return {begin(), end()}; }

  // The memfd behind the bytes (owned; valid while this object lives), or -1.
  int fd() const { return fd_; }
  // Random and unique per buffer: lets a peer that mapped fd() recognise the buffer later.
  uint64_t id() const { return id_; }

  friend bool operator==(const ShardBytes& a, absl::Span<const uint8_t> b) { return a.span() == b; }
  friend bool operator==(const ShardBytes& a, const std::vector<uint8_t>& b) {
    return a.span() == absl::MakeConstSpan(b);
  }
  friend bool operator==(const ShardBytes& a, const ShardBytes& b) { return a.span() == b.span(); }

 private:
  ShardBytes() = default;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // bytes mapped at data_ (0 for an empty shard)
  int fd_ = -1;
  uint64_t id_ = 0;
};

}  // namespace skyrl::weight_sync
