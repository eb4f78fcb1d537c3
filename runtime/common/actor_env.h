// The environment an actor process starts with: the variables the worker sets for it, in one
// place. These are reserved (an actor's env_vars may not set them: ValidateActorEnvVar says
// which); every other valid name passes through to the actor, SKYRL_* included (frameworks
// keep their own settings there). docs/python.md lists them.
#pragma once

#include <algorithm>
#include <array>
#include <string_view>

namespace skyrl::actor_env {

inline constexpr char kToken[] = "SKYRL_TOKEN";         // the cluster token
inline constexpr char kAddress[] = "SKYRL_ADDRESS";     // the head
inline constexpr char kNodeHost[] = "SKYRL_NODE_HOST";  // where this node's actors listen
inline constexpr char kNodeId[] = "SKYRL_NODE_ID";
inline constexpr char kJobId[] = "SKYRL_JOB_ID";   // the job that owns the actor, if any
inline constexpr char kPython[] = "SKYRL_PYTHON";  // skyrl-worker --python
inline constexpr char kWorkingDir[] = "SKYRL_WORKING_DIR";
inline constexpr char kWorkingDirDigest[] = "SKYRL_WORKING_DIR_DIGEST";
inline constexpr char kActorId[] = "SKYRL_ACTOR_ID";
inline constexpr char kWorkerPid[] = "SKYRL_WORKER_PID";    // the actor host dies with it
inline constexpr char kActorLease[] = "SKYRL_ACTOR_LEASE";  // runtime/common/lease.h
// The GPU ids the actor was given, comma-separated ("" for none): what get_gpu_ids() reports,
// also when CUDA_VISIBLE_DEVICES is the user's (kNoSetCudaVisibleDevices).
inline constexpr char kGpuIds[] = "SKYRL_GPU_IDS";
// Inherited from the worker (runtime/rpc/tls.h): an actor talks TLS as its worker does.
inline constexpr char kTlsCert[] = "SKYRL_TLS_CERT";
inline constexpr char kTlsKey[] = "SKYRL_TLS_KEY";
inline constexpr char kTlsCa[] = "SKYRL_TLS_CA";

inline constexpr std::array<std::string_view, 15> kReserved = {
    kToken,   kAddress,   kNodeHost,   kNodeId, kJobId,   kPython, kWorkingDir, kWorkingDirDigest,
    kActorId, kWorkerPid, kActorLease, kGpuIds, kTlsCert, kTlsKey, kTlsCa};

inline bool IsReserved(std::string_view name) {
  return std::find(kReserved.begin(), kReserved.end(), name) != kReserved.end();
}

// CUDA_VISIBLE_DEVICES is the worker's to set (exactly the actor's GPU ids; "" without GPUs),
// overriding an env_vars value, unless this is set (non-empty) in the actor's environment
// (its env_vars, which include its job's) or the worker's: Ray's switch for a helper that
// manages its own devices (a colocated engine, a CUDA IPC server). Then the worker leaves it
// alone, and the actor's value, or the node's, stands.
inline constexpr char kNoSetCudaVisibleDevices[] = "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES";
inline constexpr char kCudaVisibleDevices[] = "CUDA_VISIBLE_DEVICES";

}  // namespace skyrl::actor_env
