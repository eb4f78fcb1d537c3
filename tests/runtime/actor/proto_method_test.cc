// Methods on protobuf messages (runtime/common/proto_method.h): what MethodTable registers for
// a ProtoMethod parses the request, serializes the reply, and refuses bytes that are not the
// method's request, naming the method and the type.
#include "runtime/common/proto_method.h"

#include "gtest/gtest.h"
#include "runtime/actor/actor.h"
#include "skyrl/kv.pb.h"

namespace skyrl {
namespace {

inline constexpr ProtoMethod<v1::KvGetRequest, v1::KvGetReply> kLookup{"lookup"};

class Table : public Actor {
 public:
  static void RegisterMethods(MethodTable<Table>& t) { t.Add(kLookup, &Table::Lookup); }
  absl::StatusOr<v1::KvGetReply> Lookup(const v1::KvGetRequest& request) {
    ++calls;
    if (request.key() != "k") return absl::NotFoundError(absl::StrCat("no key ", request.key()));
    v1::KvGetReply reply;
    reply.set_value(std::string("\0v", 2));
    return reply;
  }
  int calls = 0;
};

ActorMethod Registered() {
  MethodTable<Table> t;
  Table::RegisterMethods(t);
  EXPECT_EQ(t.methods().count("lookup"), 1u);
  return t.methods().at("lookup");
}

TEST(ProtoMethodTest, ARegisteredMethodTakesItsRequestAndAnswersItsReplySerialized) {
  ActorMethod lookup = Registered();
  Table table;
  v1::KvGetRequest request;
  request.set_key("k");
  absl::StatusOr<std::string> bytes = lookup(table, request.SerializeAsString());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<v1::KvGetReply> reply =
      ParseMessage<v1::KvGetReply>(*bytes, absl::StatusCode::kInternal, "reply");
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->value(), std::string("\0v", 2));

  // The method's own error comes back with its code.
  request.set_key("other");
  absl::StatusOr<std::string> missing = lookup(table, request.SerializeAsString());
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_EQ(table.calls, 2);
}

TEST(ProtoMethodTest, BytesThatAreNotTheRequestAreRefusedBeforeTheMethodRuns) {
  ActorMethod lookup = Registered();
  Table table;
  // A length-delimited field that claims 5 bytes and holds 2.
  absl::StatusOr<std::string> r = lookup(table, std::string("\x0a\x05"
                                                            "ab",
                                                            4));
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("lookup: arguments: not a skyrl.v1.KvGetRequest"), std::string::npos)
      << r.status();
  EXPECT_EQ(table.calls, 0);

  absl::StatusOr<v1::KvGetReply> reply =
      ParseMessage<v1::KvGetReply>(std::string("\x0a\x05"
                                               "ab",
                                               4),
                                   absl::StatusCode::kInternal, "trainer: reply");
  EXPECT_TRUE(absl::IsInternal(reply.status())) << reply.status();
  EXPECT_NE(reply.status().message().find("trainer: reply: not a skyrl.v1.KvGetReply (4 bytes)"),
            std::string::npos)
      << reply.status();
}

}  // namespace
}  // namespace skyrl
