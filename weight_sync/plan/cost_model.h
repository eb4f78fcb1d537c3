// The cost model: every endpoint (GPU) has an NVLink path to GPUs on its node and a NIC to
// everything else, used at the same time and independently, full duplex. An endpoint's time
// is max(intra-node bytes / NVLink bandwidth, inter-node bytes / NIC bandwidth), taken over
// what it sends and what it receives; a plan's time is its slowest endpoint's.
//
// Plain values; no thread-safety concerns.
#pragma once

#include <algorithm>
#include <cstdint>

namespace skyrl::weight_sync {

struct CostModel {
  double nvlink_bytes_per_s = 900e9;   // per GPU, inside a node
  double nic_bytes_per_s = 400e9 / 8;  // 400 Gb/s per GPU, across nodes
  int gpus_per_node = 8;
  // Global GPU index of receiver rank 0. -1: disaggregated, receivers start on the first node
  // after the senders' last; 0: colocated, receiver r shares GPU r with sender r.
  int receiver_first_gpu = -1;

  int SenderNode(int sender) const { return sender / gpus_per_node; }
  int ReceiverNode(int receiver, int num_senders) const {
    int first = receiver_first_gpu >= 0 ? receiver_first_gpu
                                        : (num_senders + gpus_per_node - 1) / gpus_per_node * gpus_per_node;
    return (first + receiver) / gpus_per_node;
  }
  double Seconds(int64_t intra_bytes, int64_t inter_bytes) const {
    return std::max(intra_bytes / nvlink_bytes_per_s, inter_bytes / nic_bytes_per_s);
  }
};

}  // namespace skyrl::weight_sync
