// `skyrl job ...`: submit a driver to the head, follow its logs, stop, list, delete.
// Each function prints for people (or JSON) and returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace skyrl::cli {

struct JobSubmitArgs {
  std::string working_dir;       // packed into a tar.gz and unpacked on the head
  std::vector<std::string> env;  // KEY=VALUE
  std::string submission_id;
  bool no_wait = false;
  std::vector<std::string> entrypoint;  // after --
};

// Without --no-wait: streams the driver's logs, then exits 0 when the job SUCCEEDED, 1 when
// it FAILED or was STOPPED. Bad arguments: 2.
int JobSubmit(const std::string& address, const std::string& token, const JobSubmitArgs& args);
int JobStatus(const std::string& address, const std::string& token, const std::string& id, bool json);
int JobLogs(const std::string& address, const std::string& token, const std::string& id, bool follow);
int JobStop(const std::string& address, const std::string& token, const std::string& id, double grace_s);
int JobList(const std::string& address, const std::string& token, bool json);
int JobDelete(const std::string& address, const std::string& token, const std::string& id);

}  // namespace skyrl::cli
