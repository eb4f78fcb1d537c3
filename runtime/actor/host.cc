#include "runtime/actor/host.h"

#include <grpcpp/grpcpp.h>

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <algorithm>
#include <deque>
#include <fstream>
#include <thread>
#include <tuple>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "runtime/actor/actor.h"
#include "runtime/common/ids.h"
#include "runtime/common/logging.h"
#include "runtime/common/signals.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/tls.h"
#include "runtime/rpc/status.h"
#include "skyrl/actor.grpc.pb.h"

namespace skyrl {
namespace {

// Serves calls with gRPC's callback API: no server thread is parked per call in flight;
// calls wait in a queue and `limit` executor threads run them (with a limit of 1, one after
// another, each caller's calls in its sequence order).
class ActorServiceImpl final : public v1::ActorService::CallbackService {
 public:
  ActorServiceImpl(std::string actor_id, const ActorClass& cls, Actor& actor,
                   const rpc::TokenAuth& auth, int limit)
      : actor_id_(std::move(actor_id)), cls_(cls), actor_(actor), auth_(auth), limit_(limit) {
    for (int i = 0; i < limit_; ++i) executors_.emplace_back([this] { Execute(); });
  }
  ~ActorServiceImpl() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    cv_.SignalAll();
    for (auto& t : executors_) t.join();
  }

  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* ctx, const v1::ActorCallRequest* req,
                                 v1::ActorCallReply* reply) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    if (grpc::Status s = auth_.Check(ctx); !s.ok()) {
      reactor->Finish(s);
      return reactor;
    }
    if (req->actor_id() != actor_id_) {
      reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                                   absl::StrCat("this process hosts actor ", actor_id_, ", not ",
                                                req->actor_id().substr(0, 64))));
      return reactor;
    }
    auto it = cls_.methods.find(req->method());
    if (it == cls_.methods.end()) {
      std::vector<std::string> names;
      for (const auto& [name, m] : cls_.methods) names.push_back(name);
      reactor->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                   absl::StrCat("actor class ", cls_.name, " has no method \"",
                                                req->method().substr(0, 128), "\" (it has: ",
                                                absl::StrJoin(names, ", "), ")")));
      return reactor;
    }
    Work w{req, reply, reactor, &it->second, limit_ == 1 && req->seq() > 0 && !req->caller_id().empty(),
           absl::Now()};
    {
      absl::MutexLock lock(&mu_);
      queue_.push_back(w);
    }
    cv_.Signal();
    return reactor;
  }

 private:
  struct Work {
    const v1::ActorCallRequest* req;
    v1::ActorCallReply* reply;
    grpc::ServerUnaryReactor* reactor;
    const ActorMethod* method;
    bool ordered;
    absl::Time arrived;
  };

  // A call may run when it is not ordered, when it is its caller's next, or when a missing
  // predecessor (cancelled before it was sent) has held the line for kOrderWait.
  bool Runnable(const Work& w, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!w.ordered) return true;
    auto next = next_seq_.find(w.req->caller_id());
    uint64_t want = next == next_seq_.end() ? 1 : next->second;
    return w.req->seq() <= want || now - w.arrived >= kOrderWait;
  }

  void Execute() {
    while (true) {
      Work w;
      {
        absl::MutexLock lock(&mu_);
        while (true) {
          if (stopping_) return;
          absl::Time now = absl::Now();
          auto it = std::find_if(queue_.begin(), queue_.end(), [&](const Work& x) {
            mu_.AssertHeld();
            return Runnable(x, now);
          });
          if (it != queue_.end()) {
            w = *it;
            queue_.erase(it);
            break;
          }
          // Nothing runnable: wait for a new call or a finished one; re-check the order
          // timeouts now and then while calls wait for a predecessor.
          if (queue_.empty()) {
            cv_.Wait(&mu_);
          } else {
            cv_.WaitWithTimeout(&mu_, absl::Milliseconds(50));
          }
        }
      }
      absl::StatusOr<std::string> result = (*w.method)(actor_, w.req->args());
      {
        absl::MutexLock lock(&mu_);
        if (w.ordered) {
          uint64_t& next = next_seq_.try_emplace(w.req->caller_id(), 1).first->second;
          next = std::max(next, w.req->seq() + 1);
        }
      }
      cv_.SignalAll();  // a successor may be runnable now
      if (result.ok()) {
        w.reply->set_result(std::move(*result));
        w.reactor->Finish(grpc::Status::OK);
      } else {
        w.reactor->Finish(rpc::ToGrpc(result.status()));
      }
    }
  }

  const std::string actor_id_;
  const ActorClass& cls_;
  Actor& actor_;
  const rpc::TokenAuth& auth_;
  static constexpr absl::Duration kOrderWait = absl::Seconds(10);
  const int limit_;
  absl::Mutex mu_;
  std::deque<Work> queue_ ABSL_GUARDED_BY(mu_);
  absl::CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, uint64_t> next_seq_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> executors_;
};

}  // namespace

int RunActorHost(int argc, char** argv) {
  if (const char* worker = std::getenv("SKYRL_WORKER_PID")) {
    // Die with the worker that launched us; if it is already gone, do not start at all.
    // Not PR_SET_PDEATHSIG: it fires when the parent *thread* that forked us exits, and the
    // worker forks from gRPC handler threads, which come and go (actors were SIGKILLed at
    // random under load). Watch for re-parenting instead.
    if (std::to_string(getppid()) != worker) return 1;
    const pid_t parent = getppid();
    std::thread([parent] {
      while (getppid() == parent) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      kill(getpid(), SIGKILL);
    }).detach();
  }
  BlockTerminationSignals();
  CLI::App app{"skyrl-actor-host: runs one actor and serves calls to it"};
  std::string class_name, init_args, actor_id, bind = "127.0.0.1", port_file, token_file,
                                                log_level = "info";
  int port = 0, max_concurrency = 1;
  if (const char* env = std::getenv("SKYRL_ACTOR_ID")) actor_id = env;
  app.add_option("--class", class_name, "registered actor class")->required();
  app.add_option("--init-args", init_args, "bytes passed to the constructor");
  app.add_option("--actor-id", actor_id, "the actor's id (default $SKYRL_ACTOR_ID, else random)");
  app.add_option("--port", port, "port to serve on (0: any free port)")->check(CLI::Range(0, 65535));
  app.add_option("--bind", bind, "address to listen on");
  app.add_option("--port-file", port_file, "write the bound port here once ready");
  app.add_option("--token-file", token_file, "cluster token file (else $SKYRL_TOKEN, else ~/.skyrl/token)");
  app.add_option("--max-concurrency", max_concurrency, "calls that may run at once")
      ->check(CLI::Range(1, 10000));
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|critical|off");
  CLI11_PARSE(app, argc, argv);
  auto fail = [](const absl::Status& s, int code) {
    std::fprintf(stderr, "skyrl-actor-host: %s\n", std::string(s.message()).c_str());
    return code;
  };
  if (absl::Status s = InitLogging("actor", log_level); !s.ok()) return fail(s, 2);
  if (actor_id.empty()) actor_id = ActorId::Random().ToString();
  if (auto id = ActorId::Parse(actor_id); !id.ok()) return fail(id.status(), 2);
  absl::StatusOr<std::string> token = rpc::LoadToken(token_file, false);
  if (!token.ok()) return fail(token.status(), 2);
  const ActorClass* cls = ActorRegistry::Get().Find(class_name);
  if (cls == nullptr)
    return fail(absl::NotFoundError(absl::StrCat(
                    "--class: no actor class \"", class_name, "\" in this host (it has: ",
                    absl::StrJoin(ActorRegistry::Get().Names(), ", "), ")")),
                2);
  absl::StatusOr<std::unique_ptr<Actor>> actor = cls->create(init_args);
  if (!actor.ok()) {
    std::fprintf(stderr, "constructor of %s failed: %s\n", class_name.c_str(),
                 std::string(actor.status().message()).c_str());
    return 3;
  }
  rpc::TokenAuth auth(*token);
  ActorServiceImpl service(actor_id, *cls, **actor, auth, max_concurrency);
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort(absl::StrCat(bind, ":", port), rpc::ServerCredentials(), &bound);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(rpc::kMaxMessageBytes);
  builder.SetMaxSendMessageSize(rpc::kMaxMessageBytes);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound == 0) return fail(absl::UnavailableError(absl::StrCat("cannot listen on ", bind, ":", port)), 1);
  if (!port_file.empty()) {
    std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << bound << "\n";
    std::rename(tmp.c_str(), port_file.c_str());
  }
  spdlog::info("actor {} ({}) ready on {}:{}", actor_id, class_name, bind, bound);
  int sig = WaitForTerminationSignal();
  spdlog::info("actor {} received signal {}, stopping", actor_id, sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}

}  // namespace skyrl
