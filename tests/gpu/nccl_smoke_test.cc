// Checks that the CUDA runtime and NCCL this build linked against work on this machine: a
// one-rank communicator and an all-reduce on the device. Skips, saying so, without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

namespace {

TEST(NcclSmokeTest, OneRankAllReduceOnDevice) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount: " << cudaGetErrorName(err) << ")";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm;
  ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
  float* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 4 * sizeof(float)), cudaSuccess);
  float host[4] = {1, 2, 3, 4};
  ASSERT_EQ(cudaMemcpy(buf, host, sizeof(host), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, comm, nullptr), ncclSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  float out[4] = {};
  ASSERT_EQ(cudaMemcpy(out, buf, sizeof(out), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out[3], 4.0f);  // one rank: the sum is the input
  cudaFree(buf);
  ncclCommDestroy(comm);
}

}  // namespace
