#include "tests/util/netns.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/util/paths.h"

namespace skyrl::testing {
namespace {

// Runs a command to the end, its output (stdout and stderr) in *out.
absl::StatusOr<ExitInfo> Run(const std::vector<std::string>& argv, std::string* out) {
  std::string dir = MakeTempDir("netns-cmd");
  SpawnOptions o;
  o.argv = argv;
  o.log_path = dir + "/out";
  absl::StatusOr<Subprocess> p = Subprocess::Start(o);
  absl::StatusOr<ExitInfo> exit = p.ok() ? absl::StatusOr<ExitInfo>(p->Wait()) : p.status();
  *out = ReadFileOrEmpty(o.log_path);
  std::remove(o.log_path.c_str());
  rmdir(dir.c_str());
  return exit;
}

// Output of a command that succeeded; empty otherwise.
std::string Output(const std::vector<std::string>& argv) {
  std::string out;
  absl::StatusOr<ExitInfo> exit = Run(argv, &out);
  return exit.ok() && exit->ok() ? out : "";
}

// Namespaces of labs whose process is gone ("skyrl-<pid>-<n>-..."): what a killed test left.
void RemoveStale() {
  for (absl::string_view line : absl::StrSplit(Output({"ip", "netns", "list"}), '\n')) {
    std::vector<std::string> words = absl::StrSplit(line, ' ');
    if (words.empty() || words[0].rfind("skyrl-", 0) != 0) continue;
    std::vector<std::string> parts = absl::StrSplit(words[0], '-');
    if (parts.size() < 4 || access(absl::StrCat("/proc/", parts[1]).c_str(), F_OK) == 0) continue;
    RunCommand({"ip", "netns", "del", words[0]}).IgnoreError();
  }
}

}  // namespace

absl::Status RunCommand(const std::vector<std::string>& argv) {
  std::string out;
  absl::StatusOr<ExitInfo> exit = Run(argv, &out);
  if (!exit.ok()) return exit.status();
  if (!exit->ok())
    return absl::InternalError(absl::StrCat(absl::StrJoin(argv, " "), ": ", exit->Describe(), ": ", out));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<NetnsLab>> NetnsLab::Create(int hosts) {
  if (hosts < 1 || hosts > 8) return absl::InvalidArgumentError("hosts: 1 to 8");
  if (geteuid() != 0)
    return absl::FailedPreconditionError("network namespaces need root, and this test runs as a user");
  RemoveStale();
  std::unique_ptr<NetnsLab> lab(new NetnsLab());
  if (absl::Status s = lab->Build(hosts); !s.ok()) {
    lab->Remove();
    return absl::FailedPreconditionError(absl::StrCat("cannot make network namespaces here: ", s.message()));
  }
  return lab;
}

NetnsLab::~NetnsLab() { Remove(); }

std::string NetnsLab::Address(int host) const { return absl::StrCat("10.213.", subnet_, ".", host + 1); }

std::vector<std::string> NetnsLab::Exec(int host) const { return {"ip", "netns", "exec", hosts_.at(host)}; }

absl::StatusOr<Subprocess> NetnsLab::Start(int host, SpawnOptions options) const {
  std::vector<std::string> argv = Exec(host);
  argv.insert(argv.end(), options.argv.begin(), options.argv.end());
  options.argv = std::move(argv);
  return Subprocess::Start(options);
}

absl::Status NetnsLab::Build(int hosts) {
  static std::atomic<int> labs{0};
  const int n = labs.fetch_add(1);
  tag_ = absl::StrCat(getpid(), "-", n);
  // Link names are at most 15 characters: "s<pid hex><n><role><i>".
  link_tag_ = absl::StrCat("s", absl::Hex(getpid()), n % 10);
  const std::string& short_tag = link_tag_;
  // A /24 that no address or route of this machine touches.
  std::string used = Output({"ip", "-o", "addr"}) + Output({"ip", "route"});
  std::mt19937 rng(std::random_device{}());
  for (int tries = 0; tries < 100 && subnet_ == 0; ++tries) {
    int k = 1 + int(rng() % 250);
    if (used.find(absl::StrCat("10.213.", k, ".")) == std::string::npos &&
        used.find("10.213.0.0/16") == std::string::npos)
      subnet_ = k;
  }
  if (subnet_ == 0) return absl::UnavailableError("no free subnet in 10.213.0.0/16");
  bridge_ = absl::StrCat("skyrl-", tag_, "-br");
  auto in = [](const std::string& ns, std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"ip", "-n", ns});
    return RunCommand(argv);
  };
  if (absl::Status s = RunCommand({"ip", "netns", "add", bridge_}); !s.ok()) return s;
  for (const auto& argv : std::vector<std::vector<std::string>>{{"link", "set", "lo", "up"},
                                                                {"link", "add", "br0", "type", "bridge"},
                                                                {"link", "set", "br0", "up"}})
    if (absl::Status s = in(bridge_, argv); !s.ok()) return s;
  // One veth pair per host, and one for this process: `a` in the host, `b` on the bridge.
  auto attach = [&](const std::string& a, const std::string& b) -> absl::Status {
    if (absl::Status s = RunCommand({"ip", "link", "add", a, "type", "veth", "peer", "name", b}); !s.ok())
      return s;
    if (absl::Status s = RunCommand({"ip", "link", "set", b, "netns", bridge_}); !s.ok()) return s;
    if (absl::Status s = in(bridge_, {"link", "set", b, "master", "br0"}); !s.ok()) return s;
    return in(bridge_, {"link", "set", b, "up"});
  };
  for (int i = 0; i < hosts; ++i) {
    std::string ns = absl::StrCat("skyrl-", tag_, "-h", i);
    if (absl::Status s = RunCommand({"ip", "netns", "add", ns}); !s.ok()) return s;
    hosts_.push_back(ns);
    std::string a = absl::StrCat(short_tag, "h", i), b = absl::StrCat(short_tag, "b", i);
    if (absl::Status s = attach(a, b); !s.ok()) return s;
    if (absl::Status s = RunCommand({"ip", "link", "set", a, "netns", ns}); !s.ok()) return s;
    for (const auto& argv :
         std::vector<std::vector<std::string>>{{"link", "set", "lo", "up"},
                                               {"addr", "add", Address(i) + "/24", "dev", a},
                                               {"link", "set", a, "up"}})
      if (absl::Status s = in(ns, argv); !s.ok()) return s;
  }
  root_link_ = absl::StrCat(short_tag, "r");
  if (absl::Status s = attach(root_link_, short_tag + "q"); !s.ok()) return s;
  if (absl::Status s =
          RunCommand({"ip", "addr", "add", absl::StrCat("10.213.", subnet_, ".254/24"), "dev", root_link_});
      !s.ok())
    return s;
  return RunCommand({"ip", "link", "set", root_link_, "up"});
}

absl::Status NetnsLab::Cut(int host) {
  return RunCommand({"ip", "-n", bridge_, "link", "set", absl::StrCat(link_tag_, "b", host), "down"});
}

absl::Status NetnsLab::Heal(int host) {
  return RunCommand({"ip", "-n", bridge_, "link", "set", absl::StrCat(link_tag_, "b", host), "up"});
}

absl::Status NetnsLab::CutBetween(int a, int b) {
  if (absl::Status s =
          RunCommand({"ip", "-n", hosts_.at(a), "route", "add", "blackhole", Address(b) + "/32"});
      !s.ok())
    return s;
  return RunCommand({"ip", "-n", hosts_.at(b), "route", "add", "blackhole", Address(a) + "/32"});
}

absl::Status NetnsLab::HealBetween(int a, int b) {
  if (absl::Status s =
          RunCommand({"ip", "-n", hosts_.at(a), "route", "del", "blackhole", Address(b) + "/32"});
      !s.ok())
    return s;
  return RunCommand({"ip", "-n", hosts_.at(b), "route", "del", "blackhole", Address(a) + "/32"});
}

absl::Status NetnsLab::DropTcpTo(int from, int to, int port) {
  return RunCommand({"ip", "-n", hosts_.at(from), "rule", "add", "to", Address(to) + "/32", "ipproto", "tcp",
                     "dport", std::to_string(port), "blackhole"});
}

absl::Status NetnsLab::UndropTcpTo(int from, int to, int port) {
  return RunCommand({"ip", "-n", hosts_.at(from), "rule", "del", "to", Address(to) + "/32", "ipproto", "tcp",
                     "dport", std::to_string(port), "blackhole"});
}

void NetnsLab::Remove() {
  // Deleting a namespace destroys the veth ends in it, and with them their peers.
  for (const std::string& ns : hosts_) RunCommand({"ip", "netns", "del", ns}).IgnoreError();
  hosts_.clear();
  if (!bridge_.empty()) RunCommand({"ip", "netns", "del", bridge_}).IgnoreError();
  bridge_.clear();
  if (!root_link_.empty())
    RunCommand({"ip", "link", "del", root_link_}).IgnoreError();  // gone already, normally
  root_link_.clear();
}

}  // namespace skyrl::testing
