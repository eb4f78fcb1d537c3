#include "runtime/rpc/tls.h"

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <tuple>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace skyrl::rpc {
namespace {

struct TlsMaterial {
  std::string cert, key, ca;
};

absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  if (text.find("-----BEGIN ") == std::string::npos)
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is not a PEM file"));
  return text;
}

const TlsMaterial& Material() {
  static TlsMaterial* m = [] {
    auto* out = new TlsMaterial;
    auto load = [](const char* var, std::string* into) {
      const char* path = std::getenv(var);
      if (!path || !*path) return;
      absl::StatusOr<std::string> pem = ReadPem(var, path);
      if (pem.ok()) *into = *pem;
    };
    load("SKYRL_TLS_CERT", &out->cert);
    load("SKYRL_TLS_KEY", &out->key);
    load("SKYRL_TLS_CA", &out->ca);
    return out;
  }();
  return *m;
}

}  // namespace

absl::Status ConfigureTls(const std::string& cert, const std::string& key, const std::string& ca) {
  if (cert.empty() != key.empty()) return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  for (auto [flag, path, var] :
       {std::tuple{"--tls-cert", cert, "SKYRL_TLS_CERT"}, std::tuple{"--tls-key", key, "SKYRL_TLS_KEY"},
        std::tuple{"--tls-ca", ca, "SKYRL_TLS_CA"}}) {
    if (path.empty()) continue;
    if (absl::StatusOr<std::string> pem = ReadPem(flag, path); !pem.ok()) return pem.status();
    setenv(var, path.c_str(), 1);
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials() {
  const TlsMaterial& m = Material();
  if (m.cert.empty() || m.key.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions opts(m.ca.empty()
                                             ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                             : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  opts.pem_root_certs = m.ca;
  opts.pem_key_cert_pairs.push_back({m.key, m.cert});
  return grpc::SslServerCredentials(opts);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials() {
  const TlsMaterial& m = Material();
  if (m.ca.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = m.ca;
  if (!m.cert.empty() && !m.key.empty()) {
    opts.pem_private_key = m.key;
    opts.pem_cert_chain = m.cert;
  }
  return grpc::SslCredentials(opts);
}

std::string TlsDescription() {
  const TlsMaterial& m = Material();
  if (m.cert.empty() || m.key.empty()) return m.ca.empty() ? "plaintext" : "plaintext server, TLS client";
  return m.ca.empty() ? "TLS" : "mutual TLS";
}

}  // namespace skyrl::rpc
