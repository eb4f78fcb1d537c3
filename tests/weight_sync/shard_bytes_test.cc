// ShardBytes (a receiver shard's buffer, shared memory where possible) and the buffer rules of
// VersionedShard that direct writes rely on.
#include "weight_sync/shard_bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "weight_sync/transport.h"

namespace skyrl::weight_sync {
namespace {

TEST(ShardBytesTest, IsZeroedSharedMemorySealedAgainstResizing) {
  auto b = ShardBytes::Make(3 * 4096 + 5);
  ASSERT_EQ(b->size(), 3u * 4096 + 5);
  EXPECT_TRUE(*b == std::vector<uint8_t>(b->size(), 0));
  ASSERT_GE(b->fd(), 0) << "memfd_create is available on every supported kernel";
  struct stat st {};
  ASSERT_EQ(fstat(b->fd(), &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), b->size());
  const int seals = fcntl(b->fd(), F_GET_SEALS);
  EXPECT_TRUE(seals & F_SEAL_SHRINK);
  EXPECT_TRUE(seals & F_SEAL_GROW);
  EXPECT_NE(ftruncate(b->fd(), 10), 0) << "a peer that maps the buffer must be able to rely on its size";
  // What another mapping of the fd writes, the buffer reads.
  void* peer = mmap(nullptr, b->size(), PROT_READ | PROT_WRITE, MAP_SHARED, b->fd(), 0);
  ASSERT_NE(peer, MAP_FAILED);
  static_cast<uint8_t*>(peer)[4097] = 42;
  munmap(peer, b->size());
  EXPECT_EQ((*b)[4097], 42);
}

TEST(ShardBytesTest, PrivateEmptyAndCopiedBuffers) {
  auto p = ShardBytes::Make(100, /*shareable=*/false);
  EXPECT_EQ(p->fd(), -1);
  (*p)[99] = 7;
  EXPECT_EQ(p->ToVector().back(), 7);
  auto e = ShardBytes::Make(0);
  EXPECT_EQ(e->size(), 0u);
  EXPECT_TRUE(*e == std::vector<uint8_t>{});
  std::vector<uint8_t> v = {1, 2, 3};
  auto c = ShardBytes::CopyOf(v);
  EXPECT_TRUE(*c == v);
  EXPECT_NE(c->id(), p->id());
  EXPECT_NE(c->id(), 0u);
}

TEST(VersionedShardBuffersTest, StagingBufferIsTheOneBeingWrittenAndIsReusedOnlyWhenSafe) {
  VersionedShard shard(4096);
  auto s1 = shard.BeginStaging(1, /*keep_live_bytes=*/false);
  ASSERT_TRUE(s1.ok());
  uint64_t id1 = 0;
  {
    std::shared_ptr<ShardBytes> b1 = shard.StagingBuffer();
    ASSERT_NE(b1, nullptr);
    EXPECT_EQ(b1->data(), s1->data());
    EXPECT_GE(b1->fd(), 0);
    id1 = b1->id();
  }  // (holding it would keep the shard from reusing it)
  shard.MarkPrepared();
  ASSERT_TRUE(shard.Commit().ok());
  EXPECT_EQ(shard.StagingBuffer(), nullptr);
  // v2 reuses the buffer that v0 lived in (nobody reads it); v3 then reuses v1's.
  ASSERT_TRUE(shard.BeginStaging(2, false).ok());
  const uint64_t id2 = shard.StagingBuffer()->id();
  shard.MarkPrepared();
  ASSERT_TRUE(shard.Commit().ok());
  ASSERT_TRUE(shard.BeginStaging(3, false).ok());
  EXPECT_EQ(shard.StagingBuffer()->id(), id1);
  shard.Abort();
  EXPECT_EQ(shard.Current().version, 2u);
  EXPECT_EQ(shard.Current().bytes->id(), id2);
}

TEST(VersionedShardBuffersTest, ABufferAReaderStillHoldsIsNotStagedInto) {
  VersionedShard shard(4096);
  for (uint64_t v : {1, 2}) {
    ASSERT_TRUE(shard.BeginStaging(v, false).ok());
    shard.MarkPrepared();
    ASSERT_TRUE(shard.Commit().ok());
  }
  // The retired buffer (version 1's) is the one v3 would reuse, but an engine still reads it.
  ASSERT_TRUE(shard.BeginStaging(3, false).ok());
  const uint64_t v1_buffer = shard.StagingBuffer()->id();
  shard.Abort();
  ASSERT_TRUE(shard.BeginStaging(3, false).ok());
  shard.MarkPrepared();
  ASSERT_TRUE(shard.Commit().ok());                   // live: v3 in a fresh buffer; retired: v2's
  VersionedShard::Snapshot reader = shard.Current();  // holds v3's buffer...
  ASSERT_TRUE(shard.BeginStaging(4, false).ok());
  shard.MarkPrepared();
  ASSERT_TRUE(shard.Commit().ok());  // ...which is retired now, still held
  ASSERT_TRUE(shard.BeginStaging(5, false).ok());
  EXPECT_NE(shard.StagingBuffer()->id(), reader.bytes->id()) << "staging into a buffer an engine reads";
  EXPECT_NE(shard.StagingBuffer()->id(), v1_buffer);
  EXPECT_EQ(reader.version, 3u);
  shard.Abort();
}

TEST(VersionedShardBuffersTest, ADiscardedTornBufferIsReplacedAtTheNextSync) {
  for (const bool discard : {false, true}) {
    VersionedShard shard(4096);
    const uint64_t live_id = shard.Current().bytes->id();
    ASSERT_TRUE(shard.BeginStaging(1, false, Staging::kInPlace).ok());
    EXPECT_EQ(shard.StagingBuffer()->id(), live_id) << "in place: the live buffer itself";
    shard.Abort(discard);
    EXPECT_EQ(shard.Current().bytes, nullptr) << "torn";
    EXPECT_FALSE(shard.BeginStaging(1, /*keep_live_bytes=*/true, Staging::kInPlace).ok())
        << "a torn shard needs a sync of the whole shard";
    ASSERT_TRUE(shard.BeginStaging(1, false, Staging::kInPlace).ok());
    EXPECT_EQ(shard.StagingBuffer()->id() == live_id, !discard) << (discard ? "discarded" : "kept");
    EXPECT_EQ(shard.StagingBuffer()->size(), 4096u);
    shard.MarkPrepared();
    ASSERT_TRUE(shard.Commit().ok());
    EXPECT_EQ(shard.Current().version, 1u);
  }
}

}  // namespace
}  // namespace skyrl::weight_sync
