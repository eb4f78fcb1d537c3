// gRPC face of the JobManager: the upload stream, log streaming, and status conversion.
#pragma once

#include "runtime/head/job_manager.h"
#include "runtime/rpc/auth.h"
#include "skyrl/job.grpc.pb.h"

namespace skyrl::head {

class JobServiceImpl final : public v1::JobService::Service {
 public:
  JobServiceImpl(JobManager& jobs, const rpc::TokenAuth& auth, archive::Limits limits)
      : jobs_(jobs), auth_(auth), limits_(limits) {}

  grpc::Status SubmitJob(grpc::ServerContext*, grpc::ServerReader<v1::SubmitJobChunk>*,
                         v1::SubmitJobReply*) override;
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest*, v1::GetJobReply*) override;
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*, v1::ListJobsReply*) override;
  grpc::Status StopJob(grpc::ServerContext*, const v1::StopJobRequest*, v1::StopJobReply*) override;
  grpc::Status DeleteJob(grpc::ServerContext*, const v1::DeleteJobRequest*, v1::DeleteJobReply*) override;
  grpc::Status JobLogs(grpc::ServerContext*, const v1::JobLogsRequest*,
                       grpc::ServerWriter<v1::JobLogsChunk>*) override;

 private:
  JobManager& jobs_;
  const rpc::TokenAuth& auth_;
  const archive::Limits limits_;
};

}  // namespace skyrl::head
