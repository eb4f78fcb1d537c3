// Where a job's per-step metrics live in the head's KV store: one JSON object per step under
// "jobs/<job id>/metrics/<step, 8 digits>", so a prefix scan returns them in step order. The
// job writes them (the GRPO driver after each step, through Client::KvPut); the dashboard
// plots them; deleting the job deletes them.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace skyrl {

inline std::string JobMetricsPrefix(const std::string& job_id) {
  return absl::StrCat("jobs/", job_id, "/metrics/");
}

inline std::string JobMetricsKey(const std::string& job_id, int64_t step) {
  return absl::StrCat(JobMetricsPrefix(job_id), absl::StrFormat("%08d", step));
}

}  // namespace skyrl
