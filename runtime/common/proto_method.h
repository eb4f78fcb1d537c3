// Actor methods whose argument and result are protobuf messages, declared once for both sides:
//   inline constexpr ProtoMethod<v1::TrainRequest, v1::TrainReply> kTrain{"train"};
// The actor registers it with a member function that takes the request and returns the reply
// (MethodTable<T>::Add(kTrain, &T::Train), runtime/actor/actor.h) and a caller calls it
// (Client::CallProto(actor, kTrain, request), runtime/client/client.h). A request or reply of
// the wrong type on either side does not compile. On the wire the method is a byte method
// whose bytes are the serialized messages, so callers in other languages call it so.
// Header only: the message types are the caller's.
#pragma once

#include <climits>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace skyrl {

template <typename Request, typename Reply>
struct ProtoMethod {
  using RequestType = Request;
  using ReplyType = Reply;
  const char* name;
};

// `bytes` parsed as a Message, or `code` saying that `what` is not one (its type named).
template <typename Message>
absl::StatusOr<Message> ParseMessage(absl::string_view bytes, absl::StatusCode code, absl::string_view what) {
  Message m;
  if (bytes.size() > static_cast<size_t>(INT_MAX) ||
      !m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return absl::Status(code, absl::StrCat(what, ": not a ", m.GetTypeName(), " (", bytes.size(), " bytes)"));
  return m;
}

}  // namespace skyrl
