// Hosts on one machine: Linux network namespaces, each with its own address on a veth pair
// into a bridge that lives in a namespace of its own, so that tests run the head, workers and
// actors as a real network would see them (different addresses, no shared abstract Unix
// sockets) and cut and heal links. The test process itself joins the bridge through one more
// veth pair, so it reaches every host as a fifth machine would.
//
// Needs root (or CAP_NET_ADMIN) and `ip` (iproute2); Create says why when it cannot, for the
// test to skip. Addresses come from 10.213.0.0/16, in a /24 no route of this machine uses;
// nothing leaves the namespaces. Everything is removed by the destructor (or by the next
// Create, for what a killed test left: names start with "skyrl-").
// Not synchronized: one owner thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/common/subprocess.h"

namespace skyrl::testing {

class NetnsLab {
 public:
  // `hosts` namespaces (1 to 8), host i with address Address(i).
  static absl::StatusOr<std::unique_ptr<NetnsLab>> Create(int hosts);
  ~NetnsLab();

  int hosts() const { return int(hosts_.size()); }
  std::string Address(int host) const;  // "10.213.K.<host+1>"
  std::string Namespace(int host) const { return hosts_.at(host); }
  // The argv prefix that runs a command inside host's namespace: {"ip", "netns", "exec", ns}.
  std::vector<std::string> Exec(int host) const;
  // Starts `options` inside host's namespace.
  absl::StatusOr<Subprocess> Start(int host, SpawnOptions options) const;
  // Takes host's link to the bridge down (nothing in or out) or up again.
  absl::Status Cut(int host);
  absl::Status Heal(int host);
  // Drops every packet between two hosts only (a blackhole route on each side), or stops.
  absl::Status CutBetween(int a, int b);
  absl::Status HealBetween(int a, int b);
  // A one-way partition: drops what `from` sends to TCP port `port` on `to` (new connections
  // and established ones), while `to` still reaches `from` (a policy rule in `from`), or stops.
  absl::Status DropTcpTo(int from, int to, int port);
  absl::Status UndropTcpTo(int from, int to, int port);

 private:
  NetnsLab() = default;
  absl::Status Build(int hosts);
  void Remove();

  std::string tag_;       // unique per lab: "<pid>-<n>", in namespace names
  std::string link_tag_;  // the same for link names (15 characters at most)
  int subnet_ = 0;        // K of 10.213.K.0/24
  std::string bridge_;    // the bridge's namespace
  std::vector<std::string> hosts_;
  std::string root_link_;  // the test process's veth end, in this namespace
};

// Runs a command to the end; its output on failure.
absl::Status RunCommand(const std::vector<std::string>& argv);

}  // namespace skyrl::testing
