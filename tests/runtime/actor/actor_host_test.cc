// Real actor processes: skyrl-actor-host started through the worker's ActorProcesses, called
// directly over gRPC, and crashed on demand.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/worker/actor_processes.h"
#include "runtime/worker/host_telemetry.h"
#include "skyrl/actor.grpc.pb.h"
#include "tests/util/paths.h"

namespace skyrl {
namespace {

constexpr char kToken[] = "actor-host-test-token-0123456789";

class ActorHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("actor-host");
    procs_ = std::make_unique<worker::ActorProcesses>(worker::ActorProcessesOptions{
        .log_dir = dir_, .poll_period = absl::Milliseconds(5), .on_exit = [this](const worker::ActorExit& e) {
          absl::MutexLock lock(&mu_);
          exits_.push_back(e);
        }});
  }
  void TearDown() override {
    procs_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Starts an actor of `cls` and returns its port (0 if it never became ready).
  int Start(const ActorId& id, const std::string& cls, const std::string& init = "",
            std::vector<std::string> extra = {}) {
    std::string port_file = absl::StrCat(dir_, "/", id.ToString(), ".port");
    worker::ActorLaunch l{id,
                          {testing::BinDir() + "/skyrl-actor-host", "--class", cls, "--init-args", init,
                           "--port-file", port_file},
                          {},
                          {{"SKYRL_TOKEN", kToken}}};
    l.argv.insert(l.argv.end(), extra.begin(), extra.end());
    EXPECT_TRUE(procs_->Launch(l).ok());
    for (int i = 0; i < 400; ++i) {
      int port = 0;
      std::ifstream(port_file) >> port;
      if (port > 0) return port;
      {
        absl::MutexLock lock(&mu_);
        for (const auto& e : exits_)
          if (e.actor_id == id) return 0;
      }
      absl::SleepFor(absl::Milliseconds(25));
    }
    return 0;
  }

  grpc::Status Call(int port, const ActorId& id, const std::string& method, const std::string& args,
                    std::string* result, const std::string& token = kToken) {
    auto stub = v1::ActorService::NewStub(rpc::MakeChannel(absl::StrCat("127.0.0.1:", port)));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!token.empty()) rpc::AttachToken(&ctx, token);
    v1::ActorCallRequest req;
    req.set_actor_id(id.ToString());
    req.set_method(method);
    req.set_args(args);
    v1::ActorCallReply reply;
    grpc::Status s = stub->Call(&ctx, req, &reply);
    if (result) *result = reply.result();
    return s;
  }

  // A raw CallStream to the host, with the given token ("" for none) and actor id.
  struct RawStream {
    std::unique_ptr<v1::ActorService::Stub> stub;
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReaderWriter<v1::ActorCallBatch, v1::ActorResultBatch>> rw;
  };
  std::unique_ptr<RawStream> OpenStream(int port, const std::string& actor_id,
                                        const std::string& token = kToken) {
    auto s = std::make_unique<RawStream>();
    s->stub = v1::ActorService::NewStub(rpc::MakeChannel(absl::StrCat("127.0.0.1:", port)));
    s->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    if (!token.empty()) rpc::AttachToken(&s->ctx, token);
    s->ctx.AddMetadata("x-skyrl-actor-id", actor_id);
    s->ctx.AddMetadata("x-skyrl-caller-id", "raw-caller");
    s->rw = s->stub->CallStream(&s->ctx);
    return s;
  }
  static void AddCall(v1::ActorCallBatch* batch, uint64_t id, const std::string& method,
                      const std::string& args, uint64_t timeout_ms = 0) {
    v1::StreamedCall* c = batch->add_calls();
    c->set_call_id(id);
    c->set_method(method);
    c->set_args(args);
    c->set_seq(id);
    c->set_timeout_ms(timeout_ms);
  }
  // One part of a call sent in parts: the first carries the method and the sequence number
  // (0: unordered); later parts pass an empty method and carry only the call id and args.
  static void AddPart(v1::ActorCallBatch* batch, uint64_t id, const std::string& method, uint64_t seq,
                      const std::string& args, bool more) {
    v1::StreamedCall* c = batch->add_calls();
    c->set_call_id(id);
    c->set_method(method);
    c->set_seq(seq);
    c->set_args(args);
    c->set_more(more);
  }
  // Reads every result until the stream ends, keyed by call id.
  static std::map<uint64_t, v1::StreamedResult> ReadAll(RawStream& s) {
    std::map<uint64_t, v1::StreamedResult> results;
    v1::ActorResultBatch batch;
    while (s.rw->Read(&batch))
      for (const auto& r : batch.results()) results[r.call_id()] = r;
    return results;
  }

  std::optional<worker::ActorExit> WaitExit(const ActorId& id) {
    for (int i = 0; i < 400; ++i) {
      {
        absl::MutexLock lock(&mu_);
        for (const auto& e : exits_)
          if (e.actor_id == id) return e;
      }
      absl::SleepFor(absl::Milliseconds(25));
    }
    return std::nullopt;
  }

  std::string dir_;
  std::unique_ptr<worker::ActorProcesses> procs_;
  absl::Mutex mu_;
  std::vector<worker::ActorExit> exits_;
};

TEST_F(ActorHostTest, CounterKeepsStateAcrossCallsInOrder) {
  ActorId id = ActorId::Random();
  int port = Start(id, "counter", "10");
  ASSERT_GT(port, 0);
  std::string result;
  for (int i = 1; i <= 5; ++i) {
    ASSERT_TRUE(Call(port, id, "add", "1", &result).ok());
    EXPECT_EQ(result, absl::StrCat(10 + i));
  }
  grpc::Status bad = Call(port, id, "add", "x", &result);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("not an integer"), std::string::npos);
}

TEST_F(ActorHostTest, WrongTokenMethodOrActorIdAreClearErrors) {
  ActorId id = ActorId::Random();
  int port = Start(id, "echo");
  ASSERT_GT(port, 0);
  std::string result;
  ASSERT_TRUE(Call(port, id, "echo", std::string("a\0b", 3), &result).ok());
  EXPECT_EQ(result, std::string("a\0b", 3));
  EXPECT_EQ(Call(port, id, "echo", "x", &result, "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Call(port, id, "echo", "x", &result, "wrong-token-0123456789").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::Status missing = Call(port, id, "nope", "", &result);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(missing.error_message().find("it has: echo"), std::string::npos) << missing.error_message();
  EXPECT_EQ(Call(port, ActorId::Random(), "echo", "", &result).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ActorHostTest, CrashOnDemandIsReportedWithTheSignalAndTheLastLines) {
  ActorId id = ActorId::Random();
  int port = Start(id, "crash");
  ASSERT_GT(port, 0);
  std::string result;
  grpc::Status s = Call(port, id, "crash", "signal 11", &result);
  EXPECT_FALSE(s.ok()) << "the call in flight fails when the actor dies";
  auto e = WaitExit(id);
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->exit.signaled);
  EXPECT_EQ(e->exit.signal, SIGSEGV);
  EXPECT_NE(e->Describe().find("raising signal 11 on request"), std::string::npos) << e->Describe();
}

TEST_F(ActorHostTest, ExitCodeAndConstructorErrorAreReported) {
  ActorId id = ActorId::Random();
  int port = Start(id, "crash");
  ASSERT_GT(port, 0);
  std::string result;
  (void)Call(port, id, "crash", "exit 7", &result);
  auto e = WaitExit(id);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->exit.exit_code, 7);

  ActorId bad = ActorId::Random();
  EXPECT_EQ(Start(bad, "crash", "fail"), 0);
  auto ctor = WaitExit(bad);
  ASSERT_TRUE(ctor.has_value());
  EXPECT_EQ(ctor->exit.exit_code, 3);
  ASSERT_FALSE(ctor->last_lines.empty());
  EXPECT_NE(ctor->last_lines.back().find("told to fail in its constructor"), std::string::npos)
      << ctor->Describe();

  ActorId unknown = ActorId::Random();
  EXPECT_EQ(Start(unknown, "no-such-class"), 0);
  auto u = WaitExit(unknown);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->exit.exit_code, 2);
  EXPECT_NE(u->Describe().find("no actor class \"no-such-class\""), std::string::npos) << u->Describe();
}

TEST_F(ActorHostTest, MaxConcurrencyOneRunsCallsOneAtATime) {
  ActorId serial = ActorId::Random(), parallel = ActorId::Random();
  int p1 = Start(serial, "sleep");
  int p2 = Start(parallel, "sleep", "", {"--max-concurrency", "4"});
  ASSERT_GT(p1, 0);
  ASSERT_GT(p2, 0);
  // Four calls in flight at once; the actor records how many ever ran together.
  auto peak_of_4 = [&](int port, const ActorId& id) {
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i)
      threads.emplace_back([&] { EXPECT_TRUE(Call(port, id, "sleep", "300", nullptr).ok()); });
    for (auto& t : threads) t.join();
    std::string peak;
    EXPECT_TRUE(Call(port, id, "peak", "", &peak).ok());
    return std::stoi(peak);
  };
  EXPECT_EQ(peak_of_4(p1, serial), 1);
  EXPECT_GT(peak_of_4(p2, parallel), 1);
}

// Call and CallStream share one admission: the same refusals, with the field that was wrong.
TEST_F(ActorHostTest, UnaryAndStreamedCallersAreAdmittedAlike) {
  ActorId id = ActorId::Random();
  int port = Start(id, "echo");
  ASSERT_GT(port, 0);
  auto stub = v1::ActorService::NewStub(rpc::MakeChannel(absl::StrCat("127.0.0.1:", port)));
  auto unary = [&](const std::string& actor_id, const std::string& caller_id) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    rpc::AttachToken(&ctx, kToken);
    v1::ActorCallRequest req;
    req.set_actor_id(actor_id);
    req.set_method("echo");
    req.set_caller_id(caller_id);
    req.set_seq(caller_id.empty() ? 0 : 1);
    v1::ActorCallReply reply;
    return stub->Call(&ctx, req, &reply);
  };
  // send_empty: attach the actor-id metadata even when it is empty.
  auto streamed = [&](const std::string& actor_id, const std::string& caller_id, bool send_empty = false) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    rpc::AttachToken(&ctx, kToken);
    if (!actor_id.empty() || send_empty) ctx.AddMetadata(rpc::kStreamActorIdKey, actor_id);
    if (!caller_id.empty()) ctx.AddMetadata(rpc::kStreamCallerIdKey, caller_id);
    auto rw = stub->CallStream(&ctx);
    v1::ActorCallBatch batch;
    AddCall(&batch, 1, "echo", "x");
    rw->Write(batch);
    rw->WritesDone();
    int answered = 0;
    for (v1::ActorResultBatch results; rw->Read(&results);) answered += results.results_size();
    grpc::Status st = rw->Finish();
    EXPECT_EQ(answered, st.ok() ? 1 : 0) << "a refused stream runs no call";
    return st;
  };
  const std::string long_caller(129, 'c');
  for (auto& [what, actor_id, caller_id, code, says] :
       std::vector<std::tuple<std::string, std::string, std::string, grpc::StatusCode, std::string>>{
           {"another actor", ActorId::Random().ToString(), "caller", grpc::StatusCode::NOT_FOUND,
            "this process hosts actor " + id.ToString()},
           {"no actor id", "", "caller", grpc::StatusCode::INVALID_ARGUMENT, "is missing"},
           {"a caller id over 128 bytes", id.ToString(), long_caller, grpc::StatusCode::INVALID_ARGUMENT,
            "is 129 bytes (at most 128)"}}) {
    grpc::Status u = unary(actor_id, caller_id), s = streamed(actor_id, caller_id);
    EXPECT_EQ(u.error_code(), code) << what << ": " << u.error_message();
    EXPECT_EQ(s.error_code(), code) << what << ": " << s.error_message();
    EXPECT_NE(u.error_message().find(says), std::string::npos) << what << ": " << u.error_message();
    EXPECT_NE(s.error_message().find(says), std::string::npos) << what << ": " << s.error_message();
  }
  EXPECT_NE(unary("", "c").error_message().find("ActorCallRequest.actor_id"), std::string::npos);
  EXPECT_NE(streamed("", "c").error_message().find(rpc::kStreamActorIdKey), std::string::npos);
  grpc::Status present_but_empty = streamed("", "c", /*send_empty=*/true);
  EXPECT_EQ(present_but_empty.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << present_but_empty.error_message();
  EXPECT_TRUE(unary(id.ToString(), "caller").ok());
  EXPECT_TRUE(streamed(id.ToString(), "caller").ok());
}

TEST_F(ActorHostTest, CallStreamChecksTokenAndActorOnceAtTheStart) {
  ActorId id = ActorId::Random();
  int port = Start(id, "counter", "10");
  ASSERT_GT(port, 0);
  auto refused = [&](const std::string& actor_id, const std::string& token) {
    auto s = OpenStream(port, actor_id, token);
    v1::ActorCallBatch batch;
    AddCall(&batch, 1, "add", "5");
    s->rw->Write(batch);
    s->rw->WritesDone();
    EXPECT_TRUE(ReadAll(*s).empty()) << "no call runs on a refused stream";
    return s->rw->Finish();
  };
  grpc::Status none = refused(id.ToString(), "");
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED) << none.error_message();
  grpc::Status wrong = refused(id.ToString(), "wrong-token-0123456789");
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED) << wrong.error_message();
  grpc::Status other = refused(ActorId::Random().ToString(), kToken);
  EXPECT_EQ(other.error_code(), grpc::StatusCode::NOT_FOUND) << other.error_message();
  EXPECT_NE(other.error_message().find("this process hosts actor " + id.ToString()), std::string::npos)
      << other.error_message();
  std::string total;
  ASSERT_TRUE(Call(port, id, "get", "", &total).ok());
  EXPECT_EQ(total, "10") << "none of the refused streams' calls ran";

  // The same stream, accepted: two batches, results by call id, then OK once half-closed.
  auto s = OpenStream(port, id.ToString());
  v1::ActorCallBatch first, second;
  AddCall(&first, 1, "add", "1");
  AddCall(&first, 2, "add", "2");
  AddCall(&second, 3, "add", "x");
  AddCall(&second, 4, "get", "");
  ASSERT_TRUE(s->rw->Write(first));
  ASSERT_TRUE(s->rw->Write(second));
  s->rw->WritesDone();
  auto results = ReadAll(*s);
  grpc::Status end = s->rw->Finish();
  EXPECT_TRUE(end.ok()) << end.error_message();
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[1].result(), "11");
  EXPECT_EQ(results[2].result(), "13");
  EXPECT_EQ(results[3].code(), int(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_NE(results[3].message().find("not an integer"), std::string::npos) << results[3].message();
  EXPECT_EQ(results[4].result(), "13");
}

TEST_F(ActorHostTest, CallStreamSkipsCallsThatWaitedPastTheirTimeout) {
  ActorId id = ActorId::Random();
  int port = Start(id, "sleep");
  ASSERT_GT(port, 0);
  auto s = OpenStream(port, id.ToString());
  v1::ActorCallBatch batch;
  AddCall(&batch, 1, "sleep", "400");
  AddCall(&batch, 2, "sleep", "1", /*timeout_ms=*/100);  // waits 400 ms behind call 1
  AddCall(&batch, 3, "nope", "");
  AddCall(&batch, 4, "sleep", "2", /*timeout_ms=*/10000);
  ASSERT_TRUE(s->rw->Write(batch));
  s->rw->WritesDone();
  auto results = ReadAll(*s);
  EXPECT_TRUE(s->rw->Finish().ok());
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[1].code(), 0);
  EXPECT_EQ(results[1].result(), "400");
  EXPECT_EQ(results[2].code(), int(grpc::StatusCode::DEADLINE_EXCEEDED)) << results[2].message();
  EXPECT_NE(results[2].message().find("not started"), std::string::npos) << results[2].message();
  EXPECT_EQ(results[3].code(), int(grpc::StatusCode::UNIMPLEMENTED));
  EXPECT_NE(results[3].message().find("it has: peak, sleep"), std::string::npos) << results[3].message();
  EXPECT_EQ(results[4].result(), "2") << "calls after a skipped or refused one still run, in order";
}

// Args in parts, results in parts: a host writing messages of at most 64 KiB echoes 200 KiB
// sent as three parts, with whole calls between the parts; over --max-call-bytes is refused
// (RESOURCE_EXHAUSTED) and the calls after it still run, in order.
TEST_F(ActorHostTest, LargeArgsAndResultsTravelInParts) {
  ActorId id = ActorId::Random();
  int port = Start(id, "echo", "", {"--message-bytes", "65536", "--max-call-bytes", "262144"});
  ASSERT_GT(port, 0);
  std::string big(200 << 10, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = char(i * 7 % 251);
  auto s = OpenStream(port, id.ToString());
  v1::ActorCallBatch batch;
  AddPart(&batch, 1, "echo", 1, big.substr(0, 80 << 10), true);
  ASSERT_TRUE(s->rw->Write(batch));
  batch.Clear();
  AddCall(&batch, 2, "echo", "small");  // ordered after call 1: waits for its last part
  AddPart(&batch, 1, "", 0, big.substr(80 << 10, 80 << 10), true);
  ASSERT_TRUE(s->rw->Write(batch));
  batch.Clear();
  AddPart(&batch, 1, "", 0, big.substr(160 << 10, 40 << 10), false);
  // Call 3: 300 KiB in two parts, over the 256 KiB limit.
  AddPart(&batch, 3, "echo", 3, std::string(150 << 10, 'x'), true);
  ASSERT_TRUE(s->rw->Write(batch));
  batch.Clear();
  AddPart(&batch, 3, "", 0, std::string(150 << 10, 'x'), false);
  AddCall(&batch, 4, "echo", "after");
  ASSERT_TRUE(s->rw->Write(batch));
  s->rw->WritesDone();

  std::map<uint64_t, std::string> whole;
  std::map<uint64_t, int> parts, codes;
  std::vector<uint64_t> order;
  v1::ActorResultBatch in;
  while (s->rw->Read(&in)) {
    size_t bytes = in.ByteSizeLong();
    EXPECT_LE(bytes, size_t{65536}) << "a message larger than --message-bytes";
    for (const auto& r : in.results()) {
      whole[r.call_id()] += r.result();
      ++parts[r.call_id()];
      if (!r.more()) {
        codes[r.call_id()] = r.code();
        order.push_back(r.call_id());
      }
    }
  }
  EXPECT_TRUE(s->rw->Finish().ok());
  EXPECT_EQ(order, (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(codes[1], 0);
  EXPECT_TRUE(whole[1] == big) << "the echoed 200 KiB differ";
  EXPECT_EQ(parts[1], 4) << "200 KiB in parts of under 64 KiB";
  EXPECT_EQ(whole[2], "small");
  EXPECT_EQ(codes[3], int(grpc::StatusCode::RESOURCE_EXHAUSTED));
  EXPECT_EQ(whole[4], "after");
}

// Seventeen calls open in parts at once: the seventeenth keeps nothing and is refused once its
// last part is in; every call gets exactly one answer, and the others run with all their args.
TEST_F(ActorHostTest, CallsOpenInPartsAreBoundedAndEachAnsweredOnce) {
  ActorId id = ActorId::Random();
  int port = Start(id, "echo");
  ASSERT_GT(port, 0);
  auto s = OpenStream(port, id.ToString());
  v1::ActorCallBatch batch;
  for (uint64_t c = 1; c <= 17; ++c) AddPart(&batch, c, "echo", 0, "a" + std::to_string(c), true);
  ASSERT_TRUE(s->rw->Write(batch));
  batch.Clear();
  for (uint64_t c = 1; c <= 17; ++c) AddPart(&batch, c, "", 0, "b", false);
  ASSERT_TRUE(s->rw->Write(batch));
  s->rw->WritesDone();
  std::map<uint64_t, int> answers;
  std::map<uint64_t, v1::StreamedResult> last;
  v1::ActorResultBatch in;
  while (s->rw->Read(&in))
    for (const auto& r : in.results()) {
      ++answers[r.call_id()];
      last[r.call_id()] = r;
    }
  EXPECT_TRUE(s->rw->Finish().ok());
  ASSERT_EQ(answers.size(), 17u);
  for (uint64_t c = 1; c <= 16; ++c) {
    EXPECT_EQ(answers[c], 1) << c;
    EXPECT_EQ(last[c].result(), "a" + std::to_string(c) + "b") << c;
  }
  EXPECT_EQ(answers[17], 1);
  EXPECT_EQ(last[17].code(), int(grpc::StatusCode::RESOURCE_EXHAUSTED)) << last[17].message();
  EXPECT_NE(last[17].message().find("more than 16 calls arriving in parts"), std::string::npos)
      << last[17].message();
}

TEST_F(ActorHostTest, SigtermEndsOpenStreamsAfterTheRunningCall) {
  ActorId id = ActorId::Random();
  int port = Start(id, "sleep");
  ASSERT_GT(port, 0);
  auto s = OpenStream(port, id.ToString());
  v1::ActorCallBatch batch;
  AddCall(&batch, 1, "sleep", "600");
  AddCall(&batch, 2, "sleep", "600");
  AddCall(&batch, 3, "sleep", "600");
  ASSERT_TRUE(s->rw->Write(batch));
  absl::SleepFor(absl::Milliseconds(200));  // call 1 runs, 2 and 3 wait
  absl::Time t0 = absl::Now();
  std::thread killer([&] { EXPECT_TRUE(procs_->Kill(id, absl::Seconds(5)).ok()); });
  auto results = ReadAll(*s);
  grpc::Status end = s->rw->Finish();
  killer.join();
  ASSERT_EQ(results.size(), 1u) << "only the running call is answered";
  EXPECT_EQ(results[1].result(), "600");
  EXPECT_EQ(end.error_code(), grpc::StatusCode::UNAVAILABLE) << end.error_message();
  EXPECT_NE(end.error_message().find("is stopping"), std::string::npos) << end.error_message();
  auto e = WaitExit(id);
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->exit.ok()) << e->Describe();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(2)) << "the open stream held the host's shutdown";
}

TEST_F(ActorHostTest, SigtermStopsTheHostCleanly) {
  ActorId id = ActorId::Random();
  ASSERT_GT(Start(id, "echo"), 0);
  ASSERT_TRUE(procs_->Kill(id, absl::Seconds(5)).ok());
  auto e = WaitExit(id);
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->exit.ok()) << e->Describe();
  EXPECT_TRUE(e->killed_by_request);
}

// Telemetry: every call counted and timed, served by the host itself (through the worker's
// HostTelemetry), and left in the records file when the host is stopped.
TEST_F(ActorHostTest, TelemetryCountsCallsAndItsRecordsOutliveTheHost) {
  ActorId id = ActorId::Random();
  const int port =
      Start(id, "echo", "", {"--call-records-file", worker::HostTelemetry::RecordsPath(dir_, id)});
  ASSERT_GT(port, 0);
  const absl::Time before = absl::Now();
  std::string result;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Call(port, id, "echo", "x", &result).ok());
  EXPECT_EQ(Call(port, id, "nope", "", &result).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  const absl::Time after = absl::Now();

  worker::HostTelemetry hosts(dir_, "127.0.0.1", kToken);
  absl::StatusOr<v1::ActorTelemetryReply> live = hosts.Live(id, /*with_records=*/true);
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_TRUE(live->enabled());
  EXPECT_EQ(live->class_name(), "echo");
  std::map<std::string, std::map<int, uint64_t>> by_method;
  for (const auto& m : live->methods())
    by_method[m.method()] = {m.calls_by_code().begin(), m.calls_by_code().end()};
  EXPECT_EQ(by_method["echo"][0], 3u);
  EXPECT_EQ(by_method["nope"][static_cast<int>(grpc::StatusCode::UNIMPLEMENTED)], 1u);
  ASSERT_EQ(live->records_size(), 4);
  int64_t last_arrival = 0;
  for (const v1::CallRecord& c : live->records()) {
    EXPECT_GE(c.arrived_unix_us(), absl::ToUnixMicros(before));
    EXPECT_LE(c.end_unix_us(), absl::ToUnixMicros(after));
    EXPECT_GE(c.arrived_unix_us(), last_arrival) << "oldest first";
    last_arrival = c.arrived_unix_us();
    if (c.method() == "echo") {
      EXPECT_GE(c.start_unix_us(), c.arrived_unix_us());
      EXPECT_GE(c.end_unix_us(), c.start_unix_us());
    } else {
      EXPECT_EQ(c.start_unix_us(), 0) << "an unknown method never runs";
    }
  }
  // Asked without the token, or for another actor: refused like a call.
  worker::HostTelemetry wrong_token(dir_, "127.0.0.1", "wrong-token-0123456789");
  EXPECT_TRUE(absl::IsUnauthenticated(wrong_token.Live(id, false).status()));
  const ActorId other = ActorId::Random();
  EXPECT_TRUE(absl::IsNotFound(hosts.Live(other, false).status())) << "no port: not serving";
  std::ofstream(absl::StrCat(dir_, "/", other.ToString(), ".port")) << port << "\n";
  absl::Status misdirected = hosts.Live(other, false).status();
  EXPECT_TRUE(absl::IsNotFound(misdirected)) << misdirected;
  EXPECT_NE(misdirected.message().find("hosts actor " + id.ToString()), std::string::npos) << misdirected;
  const ActorId garbled = ActorId::Random();
  std::ofstream(absl::StrCat(dir_, "/", garbled.ToString(), ".port")) << 70000 << "\n";
  absl::Status bad_port = hosts.Live(garbled, false).status();
  EXPECT_TRUE(absl::IsNotFound(bad_port)) << bad_port;
  EXPECT_NE(bad_port.message().find("wrote port 70000, not a port"), std::string::npos) << bad_port;

  EXPECT_TRUE(absl::IsNotFound(hosts.Left(id).status())) << "nothing left while it runs";
  ASSERT_TRUE(procs_->Kill(id, absl::Seconds(5)).ok());
  ASSERT_TRUE(WaitExit(id).has_value());
  absl::StatusOr<v1::ActorTelemetryReply> left = hosts.Left(id);
  ASSERT_TRUE(left.ok()) << left.status();
  ASSERT_EQ(left->records_size(), 4);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(left->records(i).SerializeAsString(), live->records(i).SerializeAsString());
}

// A result over the limit reaches the caller as RESOURCE_EXHAUSTED, and is counted as that.
TEST_F(ActorHostTest, TelemetryCountsAnOversizedResultAsTheCallerSawIt) {
  ActorId id = ActorId::Random();
  const int port = Start(id, "echo", "", {"--max-call-bytes", "4096"});
  ASSERT_GT(port, 0);
  auto s = OpenStream(port, id.ToString());
  v1::ActorCallBatch batch;
  AddCall(&batch, 1, "fill", "8192");
  AddCall(&batch, 2, "fill", "16");
  ASSERT_TRUE(s->rw->Write(batch));
  s->rw->WritesDone();
  auto results = ReadAll(*s);
  EXPECT_TRUE(s->rw->Finish().ok());
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].code(), int(grpc::StatusCode::RESOURCE_EXHAUSTED)) << results[1].message();
  EXPECT_NE(results[1].message().find("over this actor's limit of 4096 bytes"), std::string::npos)
      << results[1].message();
  EXPECT_EQ(results[2].result(), std::string(16, 'x'));

  worker::HostTelemetry hosts(dir_, "127.0.0.1", kToken);
  absl::StatusOr<v1::ActorTelemetryReply> live = hosts.Live(id, /*with_records=*/true);
  ASSERT_TRUE(live.ok()) << live.status();
  std::map<int, uint64_t> fills;
  for (const auto& m : live->methods())
    if (m.method() == "fill") fills = {m.calls_by_code().begin(), m.calls_by_code().end()};
  EXPECT_EQ(fills, (std::map<int, uint64_t>{{0, 1}, {int(grpc::StatusCode::RESOURCE_EXHAUSTED), 1}}));
}

TEST_F(ActorHostTest, TelemetryOffInTheEnvironmentKeepsNothing) {
  ActorId id = ActorId::Random();
  std::string port_file = absl::StrCat(dir_, "/", id.ToString(), ".port");
  worker::ActorLaunch l{
      id,
      {testing::BinDir() + "/skyrl-actor-host", "--class", "echo", "--port-file", port_file},
      {},
      {{"SKYRL_TOKEN", kToken}, {"SKYRL_CALL_TELEMETRY", "0"}}};
  ASSERT_TRUE(procs_->Launch(l).ok());
  int port = 0;
  for (int i = 0; i < 400 && port == 0; ++i) {
    std::ifstream(port_file) >> port;
    if (port == 0) absl::SleepFor(absl::Milliseconds(25));
  }
  ASSERT_GT(port, 0);
  std::string result;
  ASSERT_TRUE(Call(port, id, "echo", "x", &result).ok());
  absl::StatusOr<v1::ActorTelemetryReply> t = worker::HostTelemetry(dir_, "127.0.0.1", kToken).Live(id, true);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->enabled());
  EXPECT_EQ(t->methods_size(), 0);
  EXPECT_EQ(t->records_size(), 0);
}

}  // namespace
}  // namespace skyrl
