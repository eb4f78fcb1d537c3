#include "runtime/cli/job_command.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "runtime/archive/archive.h"
#include "runtime/cli/commands.h"
#include "runtime/views/status_view.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/status.h"
#include "skyrl/job.grpc.pb.h"

namespace skyrl::cli {

using views::JobStateName;
using views::RenderJobJson;
using views::RenderJobsJson;
namespace {

constexpr size_t kChunk = 1 << 20;

std::unique_ptr<v1::JobService::Stub> Stub(const std::string& address) {
  return v1::JobService::NewStub(rpc::MakeChannel(address));
}

bool JobManagerEnded(v1::JobState s) {
  return s == v1::JOB_SUCCEEDED || s == v1::JOB_FAILED || s == v1::JOB_STOPPED;
}

std::string Submitter() {
  const char* user = std::getenv("USER");
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return absl::StrCat(user && *user ? user : "unknown", "@", host);
}

absl::StatusOr<v1::JobInfo> Get(const std::string& address, const std::string& token, const std::string& id) {
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token, absl::Seconds(10));
  v1::GetJobRequest req;
  req.set_job_id(id);
  v1::GetJobReply reply;
  if (absl::Status s = rpc::FromGrpc(Stub(address)->GetJob(&ctx, req, &reply)); !s.ok()) return s;
  return reply.job();
}

// Streams the log from `offset` to stdout; returns the job's last state seen.
absl::StatusOr<v1::JobState> Stream(const std::string& address, const std::string& token,
                                    const std::string& id, bool follow) {
  grpc::ClientContext ctx;
  rpc::AttachToken(&ctx, token);
  v1::JobLogsRequest req;
  req.set_job_id(id);
  req.set_follow(follow);
  auto reader = Stub(address)->JobLogs(&ctx, req);
  v1::JobLogsChunk chunk;
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  while (reader->Read(&chunk)) {
    std::cout << chunk.data() << std::flush;
    state = chunk.state();
  }
  if (absl::Status s = rpc::FromGrpc(reader->Finish()); !s.ok()) return s;
  return state;
}

}  // namespace

int JobSubmit(const std::string& address, const std::string& token, const JobSubmitArgs& args) {
  if (args.entrypoint.empty())
    return Fail(absl::InvalidArgumentError("job submit: give the command after --"), 2);
  v1::SubmitJobChunk first;
  v1::JobSpec* spec = first.mutable_spec();
  for (const std::string& a : args.entrypoint) spec->add_entrypoint(a);
  for (const std::string& kv : args.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return Fail(absl::InvalidArgumentError(absl::StrCat("--env: \"", kv, "\" is not KEY=VALUE")), 2);
    (*spec->mutable_env())[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  spec->set_submission_id(args.submission_id);
  spec->set_submitter(Submitter());
  std::string archive;
  if (!args.working_dir.empty()) {
    absl::StatusOr<std::string> packed = archive::PackDirectory(args.working_dir);
    if (!packed.ok()) return Fail(packed.status(), 2);
    archive = std::move(*packed);
    spec->set_has_working_dir(true);
  }
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token, absl::Minutes(5));
  v1::SubmitJobReply reply;
  auto writer = Stub(address)->SubmitJob(&ctx, &reply);
  bool ok = writer->Write(first);
  for (size_t at = 0; ok && at < archive.size(); at += kChunk) {
    v1::SubmitJobChunk c;
    c.set_archive_chunk(archive.substr(at, kChunk));
    ok = writer->Write(c);
  }
  writer->WritesDone();
  if (absl::Status s = rpc::FromGrpc(writer->Finish()); !s.ok()) return Fail(s);
  const v1::JobInfo& job = reply.job();
  std::cerr << "job " << job.job_id() << " " << JobStateName(job.state())
            << (job.message().empty() ? "" : ": ") << job.message() << "\n";
  if (args.no_wait) {
    std::cout << job.job_id() << "\n";
    return job.state() == v1::JOB_FAILED ? 1 : 0;
  }
  if (JobManagerEnded(job.state())) return job.state() == v1::JOB_SUCCEEDED ? 0 : 1;  // e.g. could not start
  absl::StatusOr<v1::JobState> last = Stream(address, token, job.job_id(), /*follow=*/true);
  if (!last.ok()) return Fail(last.status());
  absl::StatusOr<v1::JobInfo> final_info = Get(address, token, job.job_id());
  if (!final_info.ok()) return Fail(final_info.status());
  std::cerr << "job " << final_info->job_id() << " " << JobStateName(final_info->state()) << ": "
            << final_info->message() << "\n";
  return final_info->state() == v1::JOB_SUCCEEDED ? 0 : 1;
}

int JobStatus(const std::string& address, const std::string& token, const std::string& id, bool json) {
  absl::StatusOr<v1::JobInfo> j = Get(address, token, id);
  if (!j.ok()) return Fail(j.status());
  if (json) {
    std::cout << RenderJobJson(*j);
  } else {
    std::cout << j->job_id() << " " << JobStateName(j->state()) << (j->message().empty() ? "" : ": ")
              << j->message() << "\n  command: " << absl::StrJoin(j->spec().entrypoint(), " ")
              << "\n  log: " << j->log_path() << "\n";
  }
  return 0;
}

int JobLogs(const std::string& address, const std::string& token, const std::string& id, bool follow) {
  absl::StatusOr<v1::JobState> last = Stream(address, token, id, follow);
  return last.ok() ? 0 : Fail(last.status());
}

int JobStop(const std::string& address, const std::string& token, const std::string& id, double grace_s) {
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token, absl::Seconds(grace_s + 30));
  v1::StopJobRequest req;
  req.set_job_id(id);
  req.set_grace_ms(int64_t(grace_s * 1000));
  v1::StopJobReply reply;
  if (absl::Status s = rpc::FromGrpc(Stub(address)->StopJob(&ctx, req, &reply)); !s.ok()) return Fail(s);
  std::cout << reply.job().job_id() << " " << JobStateName(reply.job().state()) << ": "
            << reply.job().message() << "\n";
  return 0;
}

int JobList(const std::string& address, const std::string& token, bool json) {
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token, absl::Seconds(10));
  v1::ListJobsReply reply;
  if (absl::Status s = rpc::FromGrpc(Stub(address)->ListJobs(&ctx, {}, &reply)); !s.ok()) return Fail(s);
  if (json) {
    std::cout << RenderJobsJson({reply.jobs().begin(), reply.jobs().end()});
    return 0;
  }
  std::printf("%-32s %-10s %-30s %s\n", "JOB", "STATE", "COMMAND", "MESSAGE");
  for (const auto& j : reply.jobs()) {
    std::string cmd = absl::StrJoin(j.spec().entrypoint(), " ");
    if (cmd.size() > 30) cmd = cmd.substr(0, 27) + "...";
    std::printf("%-32s %-10s %-30s %s\n", j.job_id().c_str(), JobStateName(j.state()).c_str(), cmd.c_str(),
                j.message().c_str());
  }
  return 0;
}

int JobDelete(const std::string& address, const std::string& token, const std::string& id) {
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token, absl::Seconds(30));
  v1::DeleteJobRequest req;
  req.set_job_id(id);
  v1::DeleteJobReply reply;
  if (absl::Status s = rpc::FromGrpc(Stub(address)->DeleteJob(&ctx, req, &reply)); !s.ok()) return Fail(s);
  std::cout << "deleted " << id << "\n";
  return 0;
}

namespace {

struct JobOptions {
  JobSubmitArgs submit;
  std::string id;
  bool json = false, follow = false;
  double grace_s = 10;
};

}  // namespace

std::vector<Command> AddJobCommands(CLI::App& app, const GlobalOptions& global,
                                    std::vector<std::string> entrypoint) {
  CLI::App* job =
      app.add_subcommand("job", "run drivers on the head: submit, status, logs, stop, list, delete");
  job->require_subcommand(1);
  auto o = std::make_shared<JobOptions>();
  o->submit.entrypoint = std::move(entrypoint);
  CLI::App* submit = job->add_subcommand("submit", "run a driver: skyrl job submit [options] -- CMD ARGS...");
  submit->add_option("--working-dir", o->submit.working_dir, "folder to upload; the driver runs in it");
  submit->add_option("--env", o->submit.env, "KEY=VALUE for the driver's environment (repeatable)");
  submit->add_option("--submission-id", o->submit.submission_id, "the job's id (default: generated)");
  submit->add_flag("--no-wait", o->submit.no_wait, "print the job id and return at once");
  CLI::App* status = job->add_subcommand("status", "a job's state and exit");
  status->add_option("job_id", o->id)->required();
  status->add_flag("--json", o->json, "machine-readable output");
  CLI::App* logs = job->add_subcommand("logs", "a job's driver output");
  logs->add_option("job_id", o->id)->required();
  logs->add_flag("--follow,-f", o->follow, "keep streaming until the job ends");
  CLI::App* stop = job->add_subcommand("stop", "SIGTERM the driver, SIGKILL after --grace; its actors die");
  stop->add_option("job_id", o->id)->required();
  stop->add_option("--grace", o->grace_s, "seconds between SIGTERM and SIGKILL")
      ->check(CLI::Range(0.0, 600.0));
  CLI::App* list = job->add_subcommand("list", "every job");
  list->add_flag("--json", o->json, "machine-readable output");
  CLI::App* del = job->add_subcommand("delete", "forget an ended job and remove its files");
  del->add_option("job_id", o->id)->required();
  // Every job command talks to the head: the address and token are checked first (exit 2).
  auto with_token = [&global](std::function<int(const std::string& token)> run) {
    return [&global, run] {
      absl::StatusOr<std::string> token = HeadToken(global);
      if (!token.ok()) return Fail(token.status(), 2);
      return run(*token);
    };
  };
  const std::string& address = global.address;
  return {
      {submit, with_token([&address, o](const std::string& t) { return JobSubmit(address, t, o->submit); })},
      {status,
       with_token([&address, o](const std::string& t) { return JobStatus(address, t, o->id, o->json); })},
      {logs,
       with_token([&address, o](const std::string& t) { return JobLogs(address, t, o->id, o->follow); })},
      {stop,
       with_token([&address, o](const std::string& t) { return JobStop(address, t, o->id, o->grace_s); })},
      {list, with_token([&address, o](const std::string& t) { return JobList(address, t, o->json); })},
      {del, with_token([&address, o](const std::string& t) { return JobDelete(address, t, o->id); })}};
}

}  // namespace skyrl::cli
