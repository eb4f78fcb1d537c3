// The head's jobs: a driver command run as a subprocess on the head's node, with the cluster
// address and token in its environment, its output in a log file, its end recorded.
//
//   (submit) -> PENDING -> RUNNING -> SUCCEEDED | FAILED | STOPPED
//   PENDING -> FAILED      the working directory was refused, or the driver could not start
//   RUNNING -> FAILED      the head that ran it stopped (found so at the next head start)
// Every state change is written to the store (table "jobs") first. When a job ends, its
// non-detached actors are killed and its non-detached placement groups removed.
// One line per submission goes to <jobs_dir>/audit.log and the head's log: when, who, from
// where, what (the command and the names of its environment variables; never values, never
// the token).
// One thread, the reaper, waits for every running driver (Linux pidfds and poll: no thread
// per job) and records each end; one more, the cleaner, then cleans up after each ended job
// in turn (its kills wait for workers), so a slow clean-up delays no other job's end.
// Safe for concurrent use.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "runtime/archive/archive.h"
#include "runtime/common/clock.h"
#include "runtime/common/subprocess.h"
#include "runtime/head/actor_manager.h"
#include "runtime/head/placement_group_manager.h"
#include "runtime/store/store.h"
#include "skyrl/job.pb.h"

namespace skyrl::head {

inline constexpr char kJobsTable[] = "jobs";

struct JobManagerOptions {
  std::string jobs_dir;      // <jobs_dir>/<job id>/{driver.log, working_dir/}
  std::string head_address;  // SKYRL_ADDRESS for drivers
  std::string token;         // SKYRL_TOKEN for drivers
  // Put first on drivers' PYTHONPATH, so that a Python driver imports skyrl_runtime (the
  // build's or the install's python/ folder); empty: PYTHONPATH as the job's env says.
  std::string python_path;
  absl::Duration default_stop_grace = absl::Seconds(10);
  archive::Limits limits;
};

class JobManager {
 public:
  JobManager(store::Store& store, ActorManager& actors, PlacementGroupManager& groups, const Clock& clock,
             JobManagerOptions options);
  // Stops running drivers (SIGTERM, then SIGKILL after 3 s) and records them FAILED: they
  // die with their head. Returns once the reaper has cleaned up after them.
  ~JobManager();

  // Loads the table. A job that was PENDING or RUNNING lost its head: its leftover process
  // group, if any, is killed and the job recorded FAILED with that reason.
  absl::Status Recover();
  // Validates the spec (errors name the field), unpacks the working directory, starts the
  // driver. Returns the job RUNNING, or FAILED with the reason when it could not start.
  absl::StatusOr<v1::JobInfo> Submit(v1::JobSpec spec, const std::string& archive, const std::string& peer);
  absl::StatusOr<v1::JobInfo> Get(const std::string& job_id) const;
  std::vector<v1::JobInfo> List() const;
  // SIGTERM to the driver's process group, SIGKILL after `grace`; returns once it ended and
  // its actors and groups are gone.
  absl::StatusOr<v1::JobInfo> Stop(const std::string& job_id, absl::Duration grace);
  // Only an ended job (once cleaned up after): FailedPrecondition otherwise.
  absl::Status Delete(const std::string& job_id);

  static bool Ended(v1::JobState s);

 private:
  // A running driver, as the reaper watches it.
  struct Watched {
    Subprocess process;
    int pidfd = -1;  // readable once it exits; -1 where the kernel has none (then polled)
  };
  // Writes the record; a failure is logged here (the head's store then refuses every later
  // write and says why: store::StickyStore) and returned for callers that answer a user.
  absl::Status Persist(const v1::JobInfo& info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The reaper's loop: waits for a driver to exit (or Wake), records each that did
  // (RecordEnd), and hands the job to the cleaner.
  void Reap();
  // The cleaner's loop: CleanUp for each job the reaper handed over, oldest first.
  void Clean();
  void Wake();  // the reaper looks at watched_ again
  // The driver of `job_id` exited with `exit`: SUCCEEDED, FAILED or STOPPED, recorded.
  void RecordEnd(const std::string& job_id, const ExitInfo& exit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Audit(const v1::JobInfo& info);
  // Kills the job's non-detached actors and removes its non-detached groups.
  void CleanUp(const std::string& job_id);

  store::Store& store_;
  ActorManager& actors_;
  PlacementGroupManager& groups_;
  const Clock& clock_;
  const JobManagerOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, v1::JobInfo> jobs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, bool> stop_requested_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Watched> watched_ ABSL_GUARDED_BY(mu_);     // running drivers
  absl::flat_hash_set<std::string> cleaning_ ABSL_GUARDED_BY(mu_);  // ended, CleanUp not done
  std::deque<std::string> to_clean_ ABSL_GUARDED_BY(mu_);           // the cleaner's queue
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_reaper_ ABSL_GUARDED_BY(mu_) = false;   // it ends once nothing is watched
  bool stop_cleaner_ ABSL_GUARDED_BY(mu_) = false;  // it ends once its queue is empty
  int wake_fd_ = -1;                                // an eventfd: Wake
  std::thread reaper_, cleaner_;
};

absl::Status ValidateJobSpec(v1::JobSpec& spec);

}  // namespace skyrl::head
