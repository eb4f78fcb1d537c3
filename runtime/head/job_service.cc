#include "runtime/head/job_service.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "runtime/rpc/status.h"

namespace skyrl::head {

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext* ctx,
                                       grpc::ServerReader<v1::SubmitJobChunk>* reader,
                                       v1::SubmitJobReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  v1::SubmitJobChunk chunk;
  if (!reader->Read(&chunk)) return rpc::ToGrpc(absl::InvalidArgumentError("submit: no job spec was sent"));
  v1::JobSpec spec = chunk.spec();
  std::string archive = chunk.archive_chunk();
  while (reader->Read(&chunk)) {
    if (chunk.has_spec()) return rpc::ToGrpc(absl::InvalidArgumentError("submit: the spec was sent twice"));
    if (int64_t(archive.size() + chunk.archive_chunk().size()) > limits_.max_archive_bytes)
      return rpc::ToGrpc(absl::ResourceExhaustedError(
          absl::StrCat("working_dir archive: more than the limit of ", limits_.max_archive_bytes, " bytes")));
    archive += chunk.archive_chunk();
  }
  absl::StatusOr<v1::JobInfo> job = jobs_.Submit(std::move(spec), archive, ctx->peer());
  if (!job.ok()) return rpc::ToGrpc(job.status());
  *reply->mutable_job() = std::move(*job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                                    v1::GetJobReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  absl::StatusOr<v1::JobInfo> job = jobs_.Get(req->job_id());
  if (!job.ok()) return rpc::ToGrpc(job.status());
  *reply->mutable_job() = std::move(*job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest*,
                                      v1::ListJobsReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  for (auto& j : jobs_.List()) *reply->add_jobs() = std::move(j);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::StopJob(grpc::ServerContext* ctx, const v1::StopJobRequest* req,
                                     v1::StopJobReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  if (req->grace_ms() < 0 || req->grace_ms() > 600'000)
    return rpc::ToGrpc(absl::InvalidArgumentError("grace_ms: must be in 0-600000"));
  absl::Duration grace = req->grace_ms() == 0 ? absl::Seconds(10) : absl::Milliseconds(req->grace_ms());
  absl::StatusOr<v1::JobInfo> job = jobs_.Stop(req->job_id(), grace);
  if (!job.ok()) return rpc::ToGrpc(job.status());
  *reply->mutable_job() = std::move(*job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::DeleteJob(grpc::ServerContext* ctx, const v1::DeleteJobRequest* req,
                                       v1::DeleteJobReply*) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  return rpc::ToGrpc(jobs_.Delete(req->job_id()));
}

grpc::Status JobServiceImpl::JobLogs(grpc::ServerContext* ctx, const v1::JobLogsRequest* req,
                                     grpc::ServerWriter<v1::JobLogsChunk>* writer) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  if (req->offset() < 0) return rpc::ToGrpc(absl::InvalidArgumentError("offset: must be 0 or more"));
  int64_t offset = req->offset();
  std::string buf(64 * 1024, '\0');
  while (!ctx->IsCancelled()) {
    absl::StatusOr<v1::JobInfo> job = jobs_.Get(req->job_id());
    if (!job.ok()) return rpc::ToGrpc(job.status());
    bool ended = JobManager::Ended(job->state());  // read before the file: nothing is missed
    std::ifstream in(job->log_path(), std::ios::binary);
    bool sent_any = false;
    if (in) {
      in.seekg(offset);
      while (in) {
        in.read(buf.data(), std::streamsize(buf.size()));
        std::streamsize n = in.gcount();
        if (n <= 0) break;
        offset += n;
        v1::JobLogsChunk chunk;
        chunk.set_data(buf.data(), size_t(n));
        chunk.set_offset(offset);
        chunk.set_state(job->state());
        if (!writer->Write(chunk)) return grpc::Status::OK;  // the reader went away
        sent_any = true;
      }
    }
    if (!req->follow() || (ended && !sent_any)) {
      v1::JobLogsChunk last;  // says the final state, with no data
      last.set_offset(offset);
      last.set_state(job->state());
      writer->Write(last);
      return grpc::Status::OK;
    }
    if (!sent_any) absl::SleepFor(absl::Milliseconds(100));
  }
  return grpc::Status::OK;
}

}  // namespace skyrl::head
