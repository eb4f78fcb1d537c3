// The C++ actor API: actor classes registered by name, their methods registered by name.
//
//   class Counter : public skyrl::Actor {
//    public:
//     static absl::StatusOr<std::unique_ptr<Counter>> Create(absl::string_view init_args);
//     static void RegisterMethods(skyrl::MethodTable<Counter>& t) { t.Add("add", &Counter::Add); }
//     absl::StatusOr<std::string> Add(absl::string_view args);
//   };
//   SKYRL_REGISTER_ACTOR(Counter, "counter");
//
// Arguments and results are bytes. A constructor that fails (Create returns an error) ends the
// actor's process with that message as its death reason.
// Registration happens during static initialization: put SKYRL_REGISTER_ACTOR in a source
// file that is compiled into the actor host executable itself (a static library's unused object
// files are dropped by the linker, and their registrations with them).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/common/proto_method.h"

namespace skyrl {

class Actor {
 public:
  virtual ~Actor() = default;
};

using ActorMethod = std::function<absl::StatusOr<std::string>(Actor&, absl::string_view args)>;

template <typename T>
class MethodTable {
 public:
  void Add(const std::string& name, absl::StatusOr<std::string> (T::*fn)(absl::string_view)) {
    methods_[name] = [fn](Actor& self, absl::string_view args) { return (static_cast<T&>(self).*fn)(args); };
  }
  // A method on protobuf messages (runtime/common/proto_method.h): arguments that do not
  // parse as its request are InvalidArgument naming the method, and its reply is serialized.
  template <typename Request, typename Reply>
  void Add(const ProtoMethod<Request, Reply>& method, absl::StatusOr<Reply> (T::*fn)(const Request&)) {
    std::string name = method.name;
    methods_[name] = [fn, name](Actor& self, absl::string_view args) -> absl::StatusOr<std::string> {
      absl::StatusOr<Request> request =
          ParseMessage<Request>(args, absl::StatusCode::kInvalidArgument, absl::StrCat(name, ": arguments"));
      if (!request.ok()) return request.status();
      absl::StatusOr<Reply> reply = (static_cast<T&>(self).*fn)(*request);
      if (!reply.ok()) return reply.status();
      return reply->SerializeAsString();
    };
  }
  std::map<std::string, ActorMethod>& methods() { return methods_; }

 private:
  std::map<std::string, ActorMethod> methods_;
};

struct ActorClass {
  std::string name;
  std::function<absl::StatusOr<std::unique_ptr<Actor>>(absl::string_view init_args)> create;
  std::map<std::string, ActorMethod> methods;
  // For classes whose methods are known only at run time (Python actors): every method name
  // not in `methods` is called through this, with its name; unset, such a name is
  // Unimplemented.
  std::function<absl::StatusOr<std::string>(Actor&, absl::string_view method, absl::string_view args)>
      any_method;
};

// Process-wide. Registration is single-threaded (static initialization); lookups after main
// starts are safe for concurrent use.
class ActorRegistry {
 public:
  static ActorRegistry& Get();
  void Register(ActorClass cls);  // a duplicate name is a broken invariant: aborts
  const ActorClass* Find(absl::string_view name) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, ActorClass, std::less<>> classes_;
};

template <typename T>
struct ActorRegistrar {
  explicit ActorRegistrar(const char* name) {
    MethodTable<T> table;
    T::RegisterMethods(table);
    ActorRegistry::Get().Register({name,
                                   [](absl::string_view init) -> absl::StatusOr<std::unique_ptr<Actor>> {
                                     absl::StatusOr<std::unique_ptr<T>> made = T::Create(init);
                                     if (!made.ok()) return made.status();
                                     return std::unique_ptr<Actor>(std::move(*made));
                                   },
                                   std::move(table.methods())});
  }
};

#define SKYRL_REGISTER_ACTOR(Type, name) \
  static ::skyrl::ActorRegistrar<Type> skyrl_actor_registrar_##Type(name)

}  // namespace skyrl
