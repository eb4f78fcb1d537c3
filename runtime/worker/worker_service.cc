#include "runtime/worker/worker_service.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/actor_env.h"
#include "absl/time/clock.h"
#include "runtime/common/logging.h"
#include "runtime/common/resources.h"
#include "runtime/rpc/status.h"
#include "runtime/worker/host_telemetry.h"

namespace skyrl::worker {
namespace {

// Writes `bytes` to `path`, readable by this user only.
absl::Status WritePrivateFile(const std::string& path, const std::string& bytes) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      close(fd);
      return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(err)));
    }
    done += size_t(n);
  }
  close(fd);
  return absl::OkStatus();
}

}  // namespace

namespace {
// The Python host beside the built-in one, when the fork server is asked for and it is there.
std::string PythonForkServerHost(const WorkerServiceOptions& o) {
  if (!o.python_fork_server) return "";
  std::string host = (std::filesystem::path(o.actor_host).parent_path() / "skyrl-actor-host-python").string();
  return access(host.c_str(), X_OK) == 0 ? host : "";
}

std::map<std::string, std::string> PythonForkServerEnv(const WorkerServiceOptions& o) {
  std::map<std::string, std::string> env;
  if (!o.python.empty()) env[actor_env::kPython] = o.python;
  return env;
}
}  // namespace

WorkerServiceImpl::WorkerServiceImpl(WorkerServiceOptions options, const rpc::TokenAuth& auth)
    : options_(std::move(options)),
      auth_(auth),
      working_dirs_(absl::StrCat(options_.log_dir, "/working_dirs"),
                    [this](const std::string& key) -> absl::StatusOr<std::string> {
                      if (!options_.fetch_working_dir)
                        return absl::FailedPreconditionError("this worker cannot reach the head's KV");
                      return options_.fetch_working_dir(key);
                    }),
      processes_(ActorProcessesOptions{.log_dir = options_.log_dir,
                                       .lease_path = options_.actor_lease ? options_.actor_lease->path() : "",
                                       .on_exit = [this](const ActorExit& e) { OnExit(e); },
                                       .fork_server_host = PythonForkServerHost(options_),
                                       .fork_server_env = PythonForkServerEnv(options_)}) {}

void WorkerServiceImpl::OnExit(const ActorExit& e) {
  v1::ActorExitInfo info;
  info.set_actor_id(e.actor_id.ToString());
  info.set_exit_code(e.exit.signaled ? -1 : e.exit.exit_code);
  info.set_signal(e.exit.signaled ? e.exit.signal : 0);
  info.set_killed_by_request(e.killed_by_request);
  for (const auto& line : e.last_lines) info.add_last_lines(line);
  info.set_description(e.Describe());
  info.set_incarnation(e.incarnation);
  if (options_.on_exit) options_.on_exit(info);
  absl::MutexLock lock(&mu_);
  exits_.emplace_back(++exit_seq_, std::move(info));
  while (exits_.size() > 100) exits_.pop_front();
}

void WorkerServiceImpl::Stop(const std::vector<ActorId>& ids) {
  for (const ActorId& id : ids)
    if (absl::Status s = processes_.Kill(id, absl::ZeroDuration()); !s.ok() && !absl::IsNotFound(s))
      spdlog::warn("cannot stop actor {}: {}", id.ToString(), s.message());
  // Gone (SIGKILLed, reaped) before the head hears from this node again: its next heartbeat
  // confirms their death, and they restart elsewhere.
  for (const ActorId& id : ids) processes_.AwaitStopped(id, 0, absl::Seconds(5));
}

bool WorkerServiceImpl::StopStart(const ActorId& id, int64_t incarnation) {
  // Not running here: refused if it comes later (ActorProcesses::Kill).
  if (absl::Status s = processes_.Kill(id, absl::ZeroDuration(), incarnation);
      !s.ok() && !absl::IsNotFound(s))
    spdlog::warn("cannot stop actor {} (start {}): {}", id.ToString(), incarnation, s.message());
  // Briefly: this runs on the heartbeat thread, and a start that will not stop is asked again
  // by the next heartbeat reply.
  if (processes_.Runs(id, incarnation)) processes_.AwaitStopped(id, incarnation + 1, absl::Milliseconds(250));
  return !processes_.Runs(id, incarnation);
}

grpc::Status WorkerServiceImpl::HeadContact(grpc::ServerContext* ctx, const v1::HeadContactRequest* req,
                                            v1::HeadContactReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  if (!req->asker_node_id().empty())
    if (absl::StatusOr<NodeId> asker = NodeId::Parse(req->asker_node_id()); !asker.ok())
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("asker_node_id: ", asker.status().message()));
  if (!options_.head_contact) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no head link");
  absl::StatusOr<v1::HeadContactReply> contact = options_.head_contact(req->asker_node_id());
  if (!contact.ok())
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(contact.status().message()));
  *reply = std::move(*contact);
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::StartActor(grpc::ServerContext* ctx, const v1::StartActorRequest* req,
                                           v1::StartActorReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  absl::StatusOr<ActorId> id = ActorId::Parse(req->actor_id());
  if (!id.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(id.status().message()));
  // What this worker uses of the spec (the head validated the whole of it).
  const v1::ActorSpec& spec = req->spec();
  if (absl::Status s = ValidateName("spec.class_name", spec.class_name()); !s.ok())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(s.message()));
  if (spec.max_concurrency() < 0 || spec.max_concurrency() > 100000)
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "spec.max_concurrency must be in 0-100000");
  if (absl::Status s = ValidateHostFlavour("spec.host", spec.host()); !s.ok())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(s.message()));
  // The job that owns the actor; a detached one outlives its job.
  const std::string job_id = spec.detached() ? "" : spec.job_id();
  if (!job_id.empty())
    if (absl::Status s = ValidateName("spec.job_id", job_id); !s.ok())
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(s.message()));
  if (spec.env_size() > 256)
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "spec.env: at most 256 variables");
  for (const auto& [k, v] : spec.env())
    if (absl::Status s = ValidateActorEnvVar("spec.env", k, v); !s.ok()) return rpc::ToGrpc(s);
  if (!req->node_id().empty())
    if (absl::Status s = NodeId::Parse(req->node_id()).status(); !s.ok())
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat("node_id: ", s.message()));
  if (req->incarnation() < 0)
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "incarnation must be >= 0");
  const LeaseWriter* lease = options_.actor_lease;
  if (lease != nullptr && lease->Overdue(MonotonicNowNs())) {
    // This node has not reached the head for a while (it was frozen or stalled, say): a new
    // actor would stop itself at once. Reaching the head now renews the lease.
    if (options_.head_contact) (void)options_.head_contact("");
    if (lease->Overdue(MonotonicNowNs()))
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "this node has not reached the head in time (its actors' lease ran out): not "
                          "starting actors until it does");
  }
  // The start timeout covers fetching the working directory too.
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  std::string working_dir;
  if (!spec.working_dir().empty()) {
    absl::StatusOr<std::string> dir = working_dirs_.Get(spec.working_dir());
    if (!dir.ok()) return rpc::ToGrpc(dir.status());
    working_dir = *dir;
  }
  // A host flavour is skyrl-actor-host-<flavour> from the actor's working directory (a user's
  // own actor classes, shipped with it), else from beside the built-in host.
  std::string host_binary = options_.actor_host;
  if (!spec.host().empty()) {
    const std::string name = absl::StrCat("skyrl-actor-host-", spec.host());
    const std::string shipped =
        working_dir.empty() ? "" : (std::filesystem::path(working_dir) / name).string();
    host_binary = !shipped.empty() && access(shipped.c_str(), X_OK) == 0
                      ? shipped
                      : (std::filesystem::path(options_.actor_host).parent_path() / name).string();
    if (access(host_binary.c_str(), X_OK) != 0)
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          absl::StrCat("this node has no actor host \"", spec.host(), "\" (", host_binary,
                       " is missing or not executable",
                       working_dir.empty() ? "" : ", nor is it in the actor's working_dir", ")"));
  }
  std::string port_file = absl::StrCat(options_.log_dir, "/", id->ToString(), ".port");
  std::remove(port_file.c_str());
  // The constructor's bytes go through a file (the host removes it): any size, any bytes,
  // and not in `ps` output.
  // Named per start: a stale or repeated start of the same actor cannot overwrite it.
  std::string init_file =
      absl::StrCat(options_.log_dir, "/", id->ToString(), ".", ActorId::Random().ToString(), ".init");
  if (absl::Status s = WritePrivateFile(init_file, spec.init_args()); !s.ok())
    return grpc::Status(grpc::StatusCode::INTERNAL, std::string(s.message()));
  ActorLaunch launch{
      *id,
      {host_binary, "--class", spec.class_name(), "--init-args-file", init_file, "--bind", options_.bind_host,
       "--port-file", port_file, "--max-concurrency", std::to_string(std::max(1, spec.max_concurrency())),
       "--call-records-file", HostTelemetry::RecordsPath(options_.log_dir, *id)},
      {req->gpu_ids().begin(), req->gpu_ids().end()},
      // SKYRL_NODE_HOST: where this node's actors listen (weight-sync receivers bind there).
      {{actor_env::kToken, options_.token},
       {actor_env::kAddress, options_.head_address},
       {actor_env::kNodeHost, options_.bind_host}}};
  for (const auto& [k, v] : spec.env()) launch.env[k] = v;
  // The job that owns the actor: what the actor creates is the job's too (the client sends
  // SKYRL_JOB_ID), and get_runtime_context().get_job_id() reads it.
  if (!job_id.empty()) launch.env[actor_env::kJobId] = job_id;
  if (!req->node_id().empty()) launch.env[actor_env::kNodeId] = req->node_id();
  if (!options_.python.empty()) launch.env[actor_env::kPython] = options_.python;
  if (!working_dir.empty()) {
    launch.working_dir = working_dir;
    launch.env[actor_env::kWorkingDir] = working_dir;
    launch.env[actor_env::kWorkingDirDigest] = spec.working_dir();
  }
  launch.incarnation = req->incarnation();
  // A previous incarnation being stopped here (the head restarts an actor on the node it ran
  // on, which came back from a death), or one the head has moved on from, goes first, and its
  // exit is not this one's.
  processes_.AwaitStopped(*id, req->incarnation(), absl::Seconds(10));
  uint64_t launched_after;
  {
    absl::MutexLock lock(&mu_);
    launched_after = exit_seq_;
  }
  // The head gave up waiting (a slow working directory fetch, say) and will place the actor
  // again: starting it now would leave a second, orphaned incarnation.
  if (ctx->IsCancelled() || absl::Now() >= deadline) {
    std::remove(init_file.c_str());
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        absl::StrCat("actor ", id->ToString(), ": the start was abandoned before launch"));
  }
  // A previous incarnation's records are not this one's.
  std::remove(HostTelemetry::RecordsPath(options_.log_dir, *id).c_str());
  const absl::Time launched = absl::Now();
  if (absl::Status s = processes_.Launch(launch); !s.ok()) {
    std::remove(init_file.c_str());
    return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
  }
  // Removed on every way out: the host deletes it once read, but may die before.
  absl::Cleanup remove_init_file = [&init_file] { std::remove(init_file.c_str()); };
  while (absl::Now() < deadline) {
    int port = 0;
    std::ifstream(port_file) >> port;
    if (port > 0) {
      if (options_.on_started) options_.on_started(absl::Now() - launched);
      reply->set_address(absl::StrCat(options_.bind_host, ":", port));
      reply->set_log_path(processes_.LogPath(*id));
      return grpc::Status::OK;
    }
    {
      absl::MutexLock lock(&mu_);
      for (auto it = exits_.rbegin(); it != exits_.rend() && it->first > launched_after; ++it)
        if (it->second.actor_id() == id->ToString())
          return grpc::Status(
              grpc::StatusCode::FAILED_PRECONDITION,
              absl::StrCat("actor ", id->ToString(), " died while starting: ", it->second.description()));
    }
    // Looked at often at first: a forked Python actor serves within tens of milliseconds.
    absl::SleepFor(absl::Now() - launched < absl::Milliseconds(200) ? absl::Milliseconds(1)
                                                                    : absl::Milliseconds(10));
  }
  processes_.Kill(*id, absl::Seconds(1)).IgnoreError();
  return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                      absl::StrCat("actor ", id->ToString(), " did not start serving within ",
                                   absl::FormatDuration(options_.start_timeout)));
}

grpc::Status WorkerServiceImpl::KillActor(grpc::ServerContext* ctx, const v1::KillActorRequest* req,
                                          v1::KillActorReply*) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  absl::StatusOr<ActorId> id = ActorId::Parse(req->actor_id());
  if (!id.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(id.status().message()));
  if (req->grace_ms() < 0 || req->grace_ms() > 600000)
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "grace_ms must be in 0-600000");
  if (req->incarnation() < 0)
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "incarnation must be >= 0");
  absl::Status s =
      processes_.Kill(*id, absl::Milliseconds(req->grace_ms() ? req->grace_ms() : 5000), req->incarnation());
  if (!s.ok()) return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::ListActors(grpc::ServerContext* ctx, const v1::ListWorkerActorsRequest*,
                                           v1::ListWorkerActorsReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  for (const ActorId& id : processes_.Running()) reply->add_running(id.ToString());
  absl::MutexLock lock(&mu_);
  for (const auto& [seq, e] : exits_) *reply->add_recent_exits() = e;
  return grpc::Status::OK;
}

}  // namespace skyrl::worker
