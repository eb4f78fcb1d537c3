#include "runtime/actor/actor.h"

#include <cstdio>
#include <cstdlib>

namespace skyrl {

ActorRegistry& ActorRegistry::Get() {
  static ActorRegistry* registry = new ActorRegistry();
  return *registry;
}

void ActorRegistry::Register(ActorClass cls) {
  if (classes_.contains(cls.name)) {
    std::fprintf(stderr, "actor class \"%s\" registered twice\n", cls.name.c_str());
    std::abort();
  }
  std::string name = cls.name;
  classes_.emplace(std::move(name), std::move(cls));
}

const ActorClass* ActorRegistry::Find(absl::string_view name) const {
  auto it = classes_.find(name);
  return it == classes_.end() ? nullptr : &it->second;
}

std::vector<std::string> ActorRegistry::Names() const {
  std::vector<std::string> out;
  for (const auto& [name, cls] : classes_) out.push_back(name);
  return out;
}

}  // namespace skyrl
