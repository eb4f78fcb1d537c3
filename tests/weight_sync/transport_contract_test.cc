// The transport contract suite (tests/weight_sync/transport_contract.h) on TCP: ranks on one
// host over Unix sockets (senders writing into the receivers' shared buffers, the default; or the
// bytes streaming through the sockets) and over loopback TCP, each with zero-copy sends and with
// the copy path; and with deltas, over TCP and streamed over Unix sockets.
#include "tests/weight_sync/transport_contract.h"
#include "weight_sync/tcp/tcp_transport.h"

namespace skyrl::weight_sync::contract {
namespace {

// zero_copy: the sender's path (vmsplice + splice, the default, or ordinary writes).
// same_host: ranks (all in this process) meet on the receivers' Unix sockets, the default on
// one host; without, over TCP on loopback, as ranks on different hosts do.
// direct: on a Unix connection, the sender writes into the receiver's buffer.
// delta: versions after the first go as deltas against the one each receiver holds.
TransportKind Tcp(bool zero_copy, bool same_host, bool direct = true, bool delta = false) {
  return {absl::StrCat(same_host ? "local" : "tcp", zero_copy ? "" : "_copy",
                       same_host && !direct ? "_stream" : "", delta ? "_delta" : ""),
          [zero_copy, same_host, direct, delta](Rendezvous* r, int rank, const TransferOptions& o) {
            TcpOptions t;
            t.rendezvous = r;
            t.receiver_rank = rank;
            t.transfer = o;
            t.zero_copy_send = zero_copy;
            t.same_host_unix_socket = same_host;
            t.same_host_direct_write = direct;
            t.delta = delta;
            return CreateTcpTransport(t);
          }};
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportContractTest,
                         ::testing::Values(Tcp(true, false), Tcp(false, false), Tcp(true, true),
                                           Tcp(false, true, /*direct=*/false),
                                           Tcp(true, true, /*direct=*/false),
                                           Tcp(true, false, true, /*delta=*/true),
                                           Tcp(false, true, /*direct=*/false, /*delta=*/true)),
                         [](const ::testing::TestParamInfo<TransportKind>& i) { return i.param.name; });

}  // namespace
}  // namespace skyrl::weight_sync::contract
