// Identifiers for the cluster's entities: nodes, actors, placement groups and jobs.
//
// An id prints as "<prefix>-<24 lowercase hex digits>", e.g. "node-3f9a0c...". The prefix
// makes a misplaced id (an actor id where a node id belongs) a parse error instead of a
// lookup that silently finds nothing. Ids are values: cheap to copy, comparable, hashable.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <functional>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace skyrl {

namespace internal {
// Fills `out` with random bytes from a process-wide CSPRNG-seeded generator.
// Safe for concurrent use.
void RandomIdBytes(std::array<uint8_t, 12>& out);
std::string IdToString(absl::string_view prefix, const std::array<uint8_t, 12>& bytes);
absl::Status ParseIdBytes(absl::string_view prefix, absl::string_view text, std::array<uint8_t, 12>& out);
}  // namespace internal

template <typename Tag>
class Id {
 public:
  static constexpr size_t kBytes = 12;

  // The nil id: all zero bytes. Never produced by Random().
  Id() : bytes_{} {}

  static Id Random() {
    Id id;
    do {
      internal::RandomIdBytes(id.bytes_);
    } while (id.IsNil());
    return id;
  }

  // Parses text that came from outside (an RPC, a CLI flag, the store). Errors name the
  // expected form, so a caller can pass the message on unchanged.
  static absl::StatusOr<Id> Parse(absl::string_view text) {
    Id id;
    absl::Status s = internal::ParseIdBytes(Tag::kPrefix, text, id.bytes_);
    if (!s.ok()) return s;
    return id;
  }

  bool IsNil() const {
    for (uint8_t b : bytes_)
      if (b != 0) return false;
    return true;
  }
  std::string ToString() const { return internal::IdToString(Tag::kPrefix, bytes_); }
  const std::array<uint8_t, kBytes>& bytes() const { return bytes_; }

  friend auto operator<=>(const Id&, const Id&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const Id& id) {
    return H::combine(std::move(h), id.bytes_);
  }

 private:
  std::array<uint8_t, kBytes> bytes_;
};

struct NodeIdTag {
  static constexpr absl::string_view kPrefix = "node";
};
struct ActorIdTag {
  static constexpr absl::string_view kPrefix = "actor";
};
struct PlacementGroupIdTag {
  static constexpr absl::string_view kPrefix = "pg";
};
struct JobIdTag {
  static constexpr absl::string_view kPrefix = "job";
};

using NodeId = Id<NodeIdTag>;
using ActorId = Id<ActorIdTag>;
using PlacementGroupId = Id<PlacementGroupIdTag>;
using JobId = Id<JobIdTag>;

// Names chosen by users (actor names, namespaces, job submission ids, label keys): 1-128
// characters of [A-Za-z0-9._-], not starting with '.' or '-'. `field` names the input in the error.
absl::Status ValidateName(absl::string_view field, absl::string_view name);

// An actor host flavour: empty (the built-in host), or 1-32 characters of [a-z0-9-]; the worker
// runs skyrl-actor-host-<flavour> from its own folder, so the name can never be a path.
absl::Status ValidateHostFlavour(absl::string_view field, absl::string_view name);

// An environment variable's name: 1-256 characters of [A-Za-z0-9_], not starting with a digit.
bool IsEnvVarName(absl::string_view name);

// One environment variable an actor asks for (runtime_env env_vars): a name of
// [A-Za-z_][A-Za-z0-9_]*, not one the worker sets (actor_env::kReserved), and a value of at
// most 64 KiB without NUL. `field` names the map in the error.
absl::Status ValidateActorEnvVar(absl::string_view field, absl::string_view name, absl::string_view value);

// The label the head gives every node: its node id, so that a label selector can pin an actor
// to one node (NodeAffinitySchedulingStrategy). Label keys starting "skyrl." are the head's.
inline constexpr char kNodeIdLabel[] = "skyrl.node-id";
inline constexpr absl::string_view kReservedLabelPrefix = "skyrl.";

// A working directory's content digest: "sha256:" and 64 lowercase hex digits (so it can name
// a folder and a KV key).
absl::Status ValidateWorkingDirDigest(absl::string_view field, absl::string_view digest);
// The head KV key a working directory's archive is stored under.
inline constexpr absl::string_view kWorkingDirKeyPrefix = "skyrl/working_dir/";

}  // namespace skyrl

template <typename Tag>
struct std::hash<skyrl::Id<Tag>> {
  size_t operator()(const skyrl::Id<Tag>& id) const {
    size_t h = 1469598103934665603ull;
    for (uint8_t b : id.bytes()) h = (h ^ b) * 1099511628211ull;
    return h;
  }
};
