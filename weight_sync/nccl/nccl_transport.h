// The NCCL transport (built only with SKYRL_HAVE_NCCL): one communicator over all senders and
// receivers of a sync, bootstrapped by exchanging the ncclUniqueId through the rendezvous
// (sender 0 publishes "<key_prefix>/nccl_id"). Global ranks: sender s is s, receiver r is
// num_senders + r; each rank drives one GPU.
//
// A sync runs in rounds: a header per pair (version, stream bytes, bucket size), then per round
// one bucket per peer, grouped (ncclGroupStart/ncclSend/ncclRecv/ncclGroupEnd) so all pairs move
// at once. Senders gather a bucket's runs into a device buffer, receivers scatter it into the
// staging shard (cudaMemcpyAsync with cudaMemcpyDefault: shards may be host or device memory).
// The communicator is non-blocking; every wait polls with TransferOptions::io_timeout, and a
// timeout or a peer's failure aborts the communicator (ncclCommAbort) and fails the sync, the
// receiver's live version staying. After an abort the transport must be recreated.
//
// Not yet: ncclBroadcast for receivers taking identical bytes, device-side checksums
// (checksums=true is refused), overlap of consecutive buckets.
#pragma once

#include <memory>
#include <string>

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
  TransferOptions transfer;
};

// Collective: every rank of the sync must call it (it creates the communicator). InvalidArgument
// for bad options, FailedPrecondition without a usable CUDA device, Unavailable/DeadlineExceeded
// when the communicator cannot be formed.
absl::StatusOr<std::unique_ptr<Transport>> CreateNcclTransport(const NcclOptions& options);

// Validates options without touching CUDA (exposed for tests on machines without GPUs).
absl::Status ValidateNcclOptions(const NcclOptions& options);

}  // namespace skyrl::weight_sync
