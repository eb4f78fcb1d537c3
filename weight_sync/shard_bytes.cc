#include "weight_sync/shard_bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <random>

namespace skyrl::weight_sync {
namespace {

// Fresh from the kernel each time (a buffer is made rarely): a generator's state would be
// copied into forked children, which would then hand out the same ids.
uint64_t RandomId() {
  std::random_device rd;
  return ((uint64_t{rd()} << 32) ^ rd()) | 1;  // never 0
}

// A sealed memfd of `bytes`, or -1 (then the caller uses private memory).
int SealedMemfd(size_t bytes) {
  const int fd = memfd_create("skyrl-weight-shard", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

std::shared_ptr<ShardBytes> ShardBytes::Make(size_t bytes, bool shareable) {
  std::shared_ptr<ShardBytes> b(new ShardBytes());
  b->size_ = bytes;
  b->id_ = RandomId();
  if (bytes == 0) return b;
  if (shareable) b->fd_ = SealedMemfd(bytes);
  void* p = b->fd_ >= 0 ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd_, 0)
                        : mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED && b->fd_ >= 0) {  // e.g. a limit on mappings of shared memory
    close(b->fd_);
    b->fd_ = -1;
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  }
  if (p == MAP_FAILED) throw std::bad_alloc();  // what std::vector would do
  // Allocated now, as std::vector's zeroing did: charged to this process (not to a peer that
  // writes into it first), and out of memory here rather than at some later first touch.
  if (madvise(p, bytes, MADV_POPULATE_WRITE) != 0) {
    if (errno == ENOMEM) {
      munmap(p, bytes);
      if (b->fd_ >= 0) close(b->fd_);
      b->fd_ = -1;
      throw std::bad_alloc();
    }
    std::memset(p, 0, bytes);  // kernels before 5.14: touch every page
  }
  b->data_ = static_cast<uint8_t*>(p);
  b->mapped_ = bytes;
  return b;
}

std::shared_ptr<ShardBytes> ShardBytes::CopyOf(absl::Span<const uint8_t> bytes, bool shareable) {
  std::shared_ptr<ShardBytes> b = Make(bytes.size(), shareable);
  if (!bytes.empty()) std::memcpy(b->data(), bytes.data(), bytes.size());
  return b;
}

ShardBytes::~ShardBytes() {
  if (mapped_ > 0) munmap(data_, mapped_);
  if (fd_ >= 0) close(fd_);
}

}  // namespace skyrl::weight_sync
