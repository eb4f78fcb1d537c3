// The head's dashboard: pages compiled into the binary (runtime/head/dashboard/) and the JSON
// they poll, served over HTTP by skyrl-head --dashboard-port (docs/operations.md "Dashboard").
//
// Nothing but the login page is served without the cluster token: a browser signs in through
// the form at /login, which sets an HttpOnly session cookie; programs send
// "Authorization: Bearer TOKEN". Unauthenticated page requests are redirected to /login, API
// requests answered 401.
//
//   GET  /                          the single page (cluster, actors, placement groups, jobs)
//   GET  /static/NAME               its script and style sheet
//   GET  /api/nodes                 `skyrl list nodes --json`, with what each node has in use
//   GET  /api/actors                `skyrl list actors --json`
//   GET  /api/actors/ID/log?tail=N  `skyrl logs ID --tail N` (default 200 lines), from its worker
//   GET  /api/placement-groups      `skyrl list pgs --json`
//   GET  /api/jobs                  `skyrl job list --json`
//   GET  /api/jobs/ID               `skyrl job status ID --json`
//   GET  /api/jobs/ID/log?tail=N    the last N bytes of the driver's log (default 64 KiB)
//   GET  /api/jobs/ID/metrics       the job's per-step metrics (job_metrics_keys.h), in step order
//   POST /login, POST /logout
//
// Thread-safe: the HTTP server calls Handle from a thread per connection.
#pragma once

#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/common/clock.h"
#include "runtime/http/http_server.h"

namespace skyrl::head {

class Head;

// The embedded files: name relative to runtime/head/dashboard/ -> bytes.
const std::map<std::string, std::string>& DashboardFiles();

struct DashboardOptions {
  absl::Duration session_ttl = absl::Hours(12);  // a login lasts this long
  int max_sessions = 1000;                       // the oldest is dropped beyond
  size_t default_log_tail = 64 * 1024;           // bytes of a job's log
  int default_log_lines = 200;                   // lines of an actor's log
  size_t max_log_tail = 4 * 1024 * 1024;
};

class Dashboard {
 public:
  // `head` and `clock` must outlive this.
  Dashboard(Head& head, std::string token, const Clock& clock, DashboardOptions options = {});

  http::Response Handle(const http::Request& req);

  static constexpr char kSessionCookie[] = "skyrl_session";

 private:
  bool Authenticated(const http::Request& req);
  http::Response Login(const http::Request& req);
  http::Response Logout(const http::Request& req);
  http::Response Api(const http::Request& req);
  http::Response ActorLog(const std::string& actor_id, const http::Request& req);
  http::Response Job(const std::string& job_id, const std::string& what, const http::Request& req);
  http::Response File(const std::string& name) const;

  Head& head_;
  const std::string token_;
  const Clock& clock_;
  const DashboardOptions options_;
  absl::Mutex mu_;
  std::map<std::string, absl::Time> sessions_ ABSL_GUARDED_BY(mu_);  // id -> expiry
};

}  // namespace skyrl::head
