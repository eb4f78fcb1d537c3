// The NCCL transport (built only with SKYRL_HAVE_NCCL): one communicator over all senders and
// receivers of a sync, bootstrapped by exchanging the ncclUniqueId through the rendezvous
// (sender 0 publishes "<key_prefix>/nccl_id/<generation>"). Global ranks: sender s is s, receiver r is
// num_senders + r; each rank drives one GPU.
//
// A sync runs in phases, every wait bounded by TransferOptions::io_timeout (communicator
// creation by NcclOptions::init_timeout):
// 1. Headers: a header per pair (version, stream bytes, bucket size, checksums on/off, and the
//    pair's broadcast group), sender to receiver over the main communicator.
// 2. Broadcast groups: a sender whose streams to several receivers are byte-identical (same
//    runs of its shard: engines that are replicas of one another) sends them with one
//    ncclBroadcast per bucket over a communicator of its own and those receivers, instead of
//    one ncclSend per receiver; NCCL pipelines the broadcast along a ring/tree, so the sender's
//    link carries the bytes once. The sender creates the group's ncclUniqueId and ships it in
//    the headers; the group's ranks create the communicator (non-blocking, all at once) and keep
//    it for later syncs with the same group. Everything else is point to point.
// 3. Buckets: per round one bucket per pair (grouped ncclSend/ncclRecv on the main
//    communicator, each broadcast on its communicator's own stream, issued in one global order
//    so no two ranks wait on each other's kernels). Senders gather a bucket's runs into a device
//    buffer, receivers scatter it into the staging shard (cudaMemcpyDefault: shards may be host
//    or device memory). With checksums on, each bucket's 64-bit digest (weight_sync/checksum.h,
//    computed on a host copy: a test and debugging aid) travels beside it and a mismatch is
//    DataLoss naming the sender and the bucket.
// 4. Confirmation: every receiver reports to each of its senders (ok, or its first failure and
//    the bucket), so Send returns OK only once every receiver has all its bytes verified, as
//    the Transport contract says. This wait is bounded by TransferOptions::sync_timeout (ranks
//    finish their rounds at different times), every other by io_timeout.
// A timeout or NCCL error aborts every communicator (ncclCommAbort) and fails the sync; the
// receiver's live version stays. Peers blocked on an aborted rank fail by their own io_timeout.
// After an abort the transport must be recreated (by every rank: the communicator is
// collective).
//
// Not yet: overlap of consecutive buckets; checksums computed on the device.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "weight_sync/rendezvous.h"
#include "weight_sync/transport.h"

namespace skyrl::weight_sync {

struct NcclOptions {
  Rendezvous* rendezvous = nullptr;  // not owned
  std::string key_prefix = "weight_sync";
  int num_senders = 0;
  int num_receivers = 0;
  bool is_sender = true;
  int rank = 0;    // rank within its side
  int device = 0;  // CUDA device of this rank
  // Send identical streams with ncclBroadcast (phase 2 above); off: one ncclSend per receiver.
  bool broadcast = true;
  // Part of the rendezvous key of the ncclUniqueId ("<key_prefix>/nccl_id/<generation>"): bump
  // it when every rank recreates its transport after an abort, so that no rank picks up the
  // previous communicator's id.
  uint64_t generation = 0;
  // Bounds communicator creation: the main one's (rendezvous included) in CreateNcclTransport and
  // a broadcast group's during a sync. Creation is collective and slower than a bucket (topology
  // discovery, proxy threads), so a short io_timeout for data need not cover it. 0: io_timeout.
  absl::Duration init_timeout = absl::ZeroDuration();
  TransferOptions transfer;
};

// Collective: every rank of the sync must call it (it creates the communicator). InvalidArgument
// for bad options, FailedPrecondition without a usable CUDA device, Unavailable/DeadlineExceeded
// when the communicator cannot be formed.
absl::StatusOr<std::unique_ptr<Transport>> CreateNcclTransport(const NcclOptions& options);

// Validates options without touching CUDA (exposed for tests on machines without GPUs).
absl::Status ValidateNcclOptions(const NcclOptions& options);

// The sender's peers grouped by identical streams (equal runs of its shard, hence equal bytes):
// each group lists indices into schedule.peers in increasing order, groups ordered by their
// first index; peers with no bytes are left out. A group of one is sent point to point. Pure;
// exposed for tests.
std::vector<std::vector<size_t>> GroupIdenticalStreams(const RankSchedule& schedule);

}  // namespace skyrl::weight_sync
