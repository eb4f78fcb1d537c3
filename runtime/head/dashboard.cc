#include "runtime/head/dashboard.h"

#include <algorithm>
#include <fstream>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "runtime/views/status_view.h"
#include "runtime/views/telemetry_view.h"
#include "runtime/common/job_metrics_keys.h"
#include "runtime/head/head.h"
#include "runtime/head/kv_service.h"
#include "runtime/rpc/auth.h"

namespace skyrl::head {
namespace {

using http::Request;
using http::Response;

Response JsonError(int status, const std::string& message) {
  return Response::Json(status, nlohmann::json{{"error", message}}.dump() + "\n");
}

std::string ContentType(const std::string& name) {
  if (absl::EndsWith(name, ".html")) return "text/html; charset=utf-8";
  if (absl::EndsWith(name, ".js")) return "text/javascript; charset=utf-8";
  if (absl::EndsWith(name, ".css")) return "text/css; charset=utf-8";
  if (absl::EndsWith(name, ".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

// 256 random bits as hex, from the kernel's generator.
std::string NewSessionId() {
  std::random_device rd;
  std::string out;
  for (int i = 0; i < 8; ++i) absl::StrAppend(&out, absl::StrFormat("%08x", rd()));
  return out;
}

// The last `n` bytes of the file, from a line start when one is in range. NotFound when the
// file cannot be opened.
absl::StatusOr<std::string> Tail(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat("no log at ", path));
  const std::streamoff size = in.tellg();
  const std::streamoff start =
      size > static_cast<std::streamoff>(n) ? size - static_cast<std::streamoff>(n) : 0;
  in.seekg(start);
  std::string text(static_cast<size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (start > 0) {
    const size_t nl = text.find('\n');
    if (nl != std::string::npos) text.erase(0, nl + 1);
  }
  return text;
}

}  // namespace

Dashboard::Dashboard(Head& head, std::string token, const Clock& clock, DashboardOptions options)
    : head_(head), token_(std::move(token)), clock_(clock), options_(options) {}

Response Dashboard::Handle(const Request& req) {
  if (req.path == "/login") return Login(req);
  if (req.path == "/logout") return Logout(req);
  // The login page's style sheet is the one file served to everyone.
  if (req.path == "/static/style.css" && req.method == "GET") return File("style.css");
  if (!Authenticated(req)) {
    if (absl::StartsWith(req.path, "/api/")) {
      Response r = JsonError(401, "sign in: send the cluster token (Authorization: Bearer TOKEN)");
      r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"skyrl\"");
      return r;
    }
    return Response::Redirect("/login");
  }
  if (absl::StartsWith(req.path, "/api/")) return Api(req);
  if (req.method != "GET") return Response::Text(405, "method not allowed\n");
  if (req.path == "/" || req.path == "/index.html") return File("index.html");
  if (absl::StartsWith(req.path, "/static/")) return File(req.path.substr(8));
  return Response::Text(404, absl::StrCat("no page ", req.path, "\n"));
}

bool Dashboard::Authenticated(const Request& req) {
  const std::string header = req.Header("authorization");
  absl::string_view bearer = header;
  if (absl::ConsumePrefix(&bearer, "Bearer ")) return rpc::TokenMatches(bearer, token_);
  const std::string session = req.Cookie(kSessionCookie);
  if (session.empty()) return false;
  absl::MutexLock l(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return false;
  if (clock_.Now() >= it->second) {
    sessions_.erase(it);
    return false;
  }
  return true;
}

Response Dashboard::Login(const Request& req) {
  const std::string& page = DashboardFiles().at("login.html");
  if (req.method == "GET") return Response::Html(200, page);
  if (req.method != "POST") return Response::Text(405, "method not allowed\n");
  const std::map<std::string, std::string> form = http::ParseForm(req.body);
  auto given = form.find("token");
  if (given == form.end() ||
      !rpc::TokenMatches(std::string(absl::StripAsciiWhitespace(given->second)), token_))
    return Response::Html(
        401,
        absl::StrReplaceAll(page, {{"<!--error-->", "<p class=\"error\" id=\"error\">Wrong token.</p>"}}));
  const std::string id = NewSessionId();
  const absl::Time now = clock_.Now();
  {
    absl::MutexLock l(&mu_);
    for (auto it = sessions_.begin(); it != sessions_.end();)
      it = it->second <= now ? sessions_.erase(it) : ++it;
    while (static_cast<int>(sessions_.size()) >= options_.max_sessions) {
      auto oldest = std::min_element(sessions_.begin(), sessions_.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
      sessions_.erase(oldest);
    }
    sessions_[id] = now + options_.session_ttl;
  }
  Response r = Response::Redirect("/");
  r.headers.emplace_back(
      "Set-Cookie", absl::StrCat(kSessionCookie, "=", id, "; Path=/; HttpOnly; SameSite=Strict; Max-Age=",
                                 absl::ToInt64Seconds(options_.session_ttl)));
  return r;
}

Response Dashboard::Logout(const Request& req) {
  if (req.method != "POST") return Response::Text(405, "method not allowed\n");
  {
    absl::MutexLock l(&mu_);
    sessions_.erase(req.Cookie(kSessionCookie));
  }
  Response r = Response::Redirect("/login");
  r.headers.emplace_back("Set-Cookie",
                         absl::StrCat(kSessionCookie, "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"));
  return r;
}

Response Dashboard::File(const std::string& name) const {
  const auto& files = DashboardFiles();
  auto it = files.find(name);
  if (it == files.end() || name == "login.html")
    return Response::Text(404, absl::StrCat("no file ", name, "\n"));
  return {200, ContentType(name), it->second, {}};
}

Response Dashboard::Api(const Request& req) {
  if (req.method != "GET") return JsonError(405, "the API is read-only: GET");
  const std::vector<std::string> parts = absl::StrSplit(req.path.substr(5), '/', absl::SkipEmpty());
  if (parts.size() == 1 && parts[0] == "nodes")
    return Response::Json(
        200, views::RenderNodesJson(head_.nodes().List(), head_.actors().List(), head_.groups().List()));
  if (parts.size() == 1 && parts[0] == "actors")
    return Response::Json(200, views::RenderActorsJson(head_.actors().List()));
  if (parts.size() == 1 && parts[0] == "placement-groups")
    return Response::Json(200, views::RenderGroupsJson(head_.groups().List()));
  if (parts.size() == 1 && parts[0] == "jobs")
    return Response::Json(200, views::RenderJobsJson(head_.jobs().List()));
  if (parts.size() >= 2 && parts.size() <= 3 && parts[0] == "jobs")
    return Job(parts[1], parts.size() == 3 ? parts[2] : "", req);
  if (parts.size() == 3 && parts[0] == "actors" && parts[2] == "log") return ActorLog(parts[1], req);
  return JsonError(404, absl::StrCat("no API ", req.path));
}

Response Dashboard::ActorLog(const std::string& actor_id, const Request& req) {
  int lines = options_.default_log_lines;
  if (const std::string t = req.Param("tail");
      !t.empty() && (!absl::SimpleAtoi(t, &lines) || lines <= 0 || lines > 100000))
    return JsonError(400, absl::StrCat("tail: \"", t, "\" is not a number of lines in 1..100000"));
  v1::ActorLogRequest log_req;
  log_req.set_actor_id(actor_id);
  log_req.set_tail_lines(lines);
  std::string text;
  absl::Status s = head_.logs().Stream(
      log_req,
      [&](const std::string& data) {
        text.append(data, 0, std::min(data.size(), options_.max_log_tail - text.size()));
        return text.size() < options_.max_log_tail;
      },
      [] { return false; });
  if (!s.ok()) {
    const int status = absl::IsInvalidArgument(s)      ? 400
                       : absl::IsNotFound(s)           ? 404
                       : absl::IsFailedPrecondition(s) ? 409
                                                       : 503;
    return JsonError(status, std::string(s.message()));
  }
  return Response::Text(200, std::move(text));
}

Response Dashboard::Job(const std::string& job_id, const std::string& what, const Request& req) {
  // Only a job the head has (its id validated at submission) names a log file or a KV prefix.
  absl::StatusOr<v1::JobInfo> job = head_.jobs().Get(job_id);
  if (!job.ok())
    return JsonError(absl::IsNotFound(job.status()) ? 404 : 503, std::string(job.status().message()));
  if (what.empty()) return Response::Json(200, views::RenderJobJson(*job));
  if (what == "log") {
    size_t tail = options_.default_log_tail;
    if (const std::string t = req.Param("tail"); !t.empty() && (!absl::SimpleAtoi(t, &tail) || tail == 0))
      return JsonError(400, absl::StrCat("tail: \"", t, "\" is not a positive number of bytes"));
    absl::StatusOr<std::string> text = Tail(job->log_path(), std::min(tail, options_.max_log_tail));
    if (!text.ok()) return JsonError(404, std::string(text.status().message()));
    return Response::Text(200, std::move(*text));
  }
  if (what == "metrics") {
    absl::StatusOr<std::vector<store::Entry>> entries =
        head_.store().Scan(kKvTable, JobMetricsPrefix(job_id));
    if (!entries.ok()) return JsonError(503, std::string(entries.status().message()));
    nlohmann::json steps = nlohmann::json::array();
    for (const store::Entry& e : *entries) {
      nlohmann::json step = nlohmann::json::parse(e.value, nullptr, /*allow_exceptions=*/false);
      if (step.is_object()) steps.push_back(std::move(step));  // a job's own bytes: skip what is not JSON
    }
    return Response::Json(200, steps.dump() + "\n");
  }
  if (what == "timeline") {
    absl::StatusOr<std::vector<store::Entry>> entries =
        head_.store().Scan(kKvTable, JobMetricsPrefix(job_id));
    if (!entries.ok()) return JsonError(503, std::string(entries.status().message()));
    std::vector<std::string> steps;
    for (store::Entry& e : *entries) steps.push_back(std::move(e.value));
    std::vector<views::ActorCalls> calls;
    for (v1::ActorInfo& a : head_.actors().List())
      if (a.spec().job_id() == job_id) calls.emplace_back().actor = std::move(a);
    views::CollectActorCalls(calls, [this](const v1::ActorCallsRequest& r) { return head_.logs().Calls(r); });
    Response out = Response::Json(200, views::RenderTimeline(job_id, steps, calls));
    out.headers.emplace_back("Content-Disposition",
                             absl::StrCat("attachment; filename=\"timeline-", job_id, ".json\""));
    return out;
  }
  return JsonError(404, absl::StrCat("no API ", req.path));
}

}  // namespace skyrl::head
