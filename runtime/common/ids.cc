#include "runtime/common/ids.h"

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/actor_env.h"

namespace skyrl::internal {

namespace {
std::mt19937_64 Seeded() {
  std::random_device rd;
  std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
  return std::mt19937_64(seq);
}
// Set in a forked child: it must not repeat its parent's ids (the worker's fork server forks
// every Python actor from one process).
std::atomic<bool> forked{false};
}  // namespace

void RandomIdBytes(std::array<uint8_t, 12>& out) {
  static std::mutex mu;
  static std::mt19937_64 gen = [] {
    pthread_atfork(nullptr, nullptr, [] { forked.store(true, std::memory_order_relaxed); });
    return Seeded();
  }();
  std::lock_guard<std::mutex> lock(mu);
  if (forked.load(std::memory_order_relaxed)) {
    forked.store(false, std::memory_order_relaxed);
    gen = Seeded();
  }
  for (size_t i = 0; i < out.size(); i += 8) {
    uint64_t v = gen();
    for (size_t j = 0; j < 8 && i + j < out.size(); ++j) out[i + j] = uint8_t(v >> (8 * j));
  }
}

std::string IdToString(absl::string_view prefix, const std::array<uint8_t, 12>& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(prefix);
  s.push_back('-');
  for (uint8_t b : bytes) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

absl::Status ParseIdBytes(absl::string_view prefix, absl::string_view text, std::array<uint8_t, 12>& out) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("invalid ", prefix, " id \"", text.substr(0, 64),
                                                   "\": ", why, " (expected ", prefix, "-<24 hex digits>)"));
  };
  if (text.size() != prefix.size() + 1 + 2 * out.size()) return bad("wrong length");
  if (text.substr(0, prefix.size()) != prefix || text[prefix.size()] != '-') return bad("wrong prefix");
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  absl::string_view hex = text.substr(prefix.size() + 1);
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return bad("not lowercase hex");
    out[i] = uint8_t(hi << 4 | lo);
  }
  return absl::OkStatus();
}

}  // namespace skyrl::internal

namespace skyrl {

absl::Status ValidateName(absl::string_view field, absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": must not be empty"));
  if (name.size() > 128)
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": longer than 128 characters (", name.size(), ")"));
  if (name[0] == '.' || name[0] == '-')
    return absl::InvalidArgumentError(absl::StrCat(field, ": \"", name, "\" must not start with '.' or '-'"));
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-';
    if (!ok)
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": \"", name.substr(0, 128), "\" has a character outside [A-Za-z0-9._-]"));
  }
  return absl::OkStatus();
}

absl::Status ValidateHostFlavour(absl::string_view field, absl::string_view name) {
  if (name.empty()) return absl::OkStatus();
  if (name.size() > 32) return absl::InvalidArgumentError(absl::StrCat(field, ": longer than 32 characters"));
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": \"", name, "\" has a character outside [a-z0-9-]"));
  return absl::OkStatus();
}

bool IsEnvVarName(absl::string_view name) {
  if (name.empty() || name.size() > 256 || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  return true;
}

absl::Status ValidateActorEnvVar(absl::string_view field, absl::string_view name, absl::string_view value) {
  if (!IsEnvVarName(name))
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": \"", name.substr(0, 64), "\" is not a variable name"));
  if (actor_env::IsReserved(std::string_view(name.data(), name.size())))
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", name, " is set by the worker"));
  if (value.size() > (64 << 10) || value.find('\0') != absl::string_view::npos)
    return absl::InvalidArgumentError(absl::StrCat(field, "[", name, "]: longer than 64 KiB or holds NUL"));
  return absl::OkStatus();
}

absl::Status ValidateWorkingDirDigest(absl::string_view field, absl::string_view digest) {
  constexpr absl::string_view kScheme = "sha256:";
  bool ok = digest.size() == kScheme.size() + 64 && absl::StartsWith(digest, kScheme);
  for (size_t i = kScheme.size(); ok && i < digest.size(); ++i)
    ok = (digest[i] >= '0' && digest[i] <= '9') || (digest[i] >= 'a' && digest[i] <= 'f');
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": \"", digest.substr(0, 80), "\" is not sha256: and 64 lowercase hex digits"));
}

}  // namespace skyrl
