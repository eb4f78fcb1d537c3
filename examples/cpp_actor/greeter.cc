// A user's own actor class, served by a host built out of tree: `greeter`, constructed with a
// greeting, answers greet(name) with "<greeting>, <name>" and says where it runs.
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/actor/actor.h"
#include "runtime/actor/host.h"

namespace {

class Greeter : public skyrl::Actor {
 public:
  explicit Greeter(std::string greeting) : greeting_(std::move(greeting)) {}
  static absl::StatusOr<std::unique_ptr<Greeter>> Create(absl::string_view init_args) {
    if (init_args.empty()) return absl::InvalidArgumentError("greeter: give a greeting");
    return std::make_unique<Greeter>(std::string(init_args));
  }
  static void RegisterMethods(skyrl::MethodTable<Greeter>& t) {
    t.Add("greet", &Greeter::Greet);
    t.Add("cwd", &Greeter::Cwd);
  }
  absl::StatusOr<std::string> Greet(absl::string_view name) { return absl::StrCat(greeting_, ", ", name); }
  absl::StatusOr<std::string> Cwd(absl::string_view) { return std::filesystem::current_path().string(); }

 private:
  std::string greeting_;
};
SKYRL_REGISTER_ACTOR(Greeter, "greeter");

}  // namespace

int main(int argc, char** argv) { return skyrl::RunActorHost(argc, argv); }
