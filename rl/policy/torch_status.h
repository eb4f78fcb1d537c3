// Converting LibTorch exceptions to absl::Status at the edge of every actors/ function that
// runs tensor code. CollectiveError carries the collective's own status through torch code
// (an autograd backward, say) so that its code survives the trip.
#pragma once

#include <c10/util/Exception.h>

#include <exception>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace skyrl::rl {

class CollectiveError : public std::runtime_error {
 public:
  explicit CollectiveError(absl::Status s)
      : std::runtime_error(std::string(s.message())), status_(std::move(s)) {}
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

// Throws CollectiveError when `s` is not OK. For use inside torch code only.
inline void ThrowIfError(const absl::Status& s) {
  if (!s.ok()) throw CollectiveError(s);
}

// The first line of a c10::Error (the rest is a C++ backtrace nobody asked for).
inline std::string FirstLine(const char* what) {
  std::string s(what);
  auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

// Runs `fn` (returning a Status, a StatusOr, or a value) and turns exceptions into statuses
// prefixed with `where`: CollectiveError keeps its code, c10::Error becomes InvalidArgument
// (shape and dtype mistakes), anything else Internal.
template <typename Fn>
auto RunTorch(absl::string_view where, Fn&& fn) {
  using R = std::invoke_result_t<Fn>;
  auto wrap = [&](absl::Status s) {
    if constexpr (std::is_same_v<R, absl::Status>) {
      return s;
    } else if constexpr (std::is_constructible_v<R, absl::Status>) {
      return R(std::move(s));
    } else {
      return absl::StatusOr<R>(std::move(s));
    }
  };
  using Out = decltype(wrap(absl::OkStatus()));
  try {
    if constexpr (std::is_same_v<R, Out>) {
      return fn();
    } else {
      return Out(fn());
    }
  } catch (const CollectiveError& e) {
    return wrap(absl::Status(e.status().code(), absl::StrCat(where, ": ", e.status().message())));
  } catch (const c10::Error& e) {
    return wrap(absl::InvalidArgumentError(absl::StrCat(where, ": ", FirstLine(e.what()))));
  } catch (const std::exception& e) {
    return wrap(absl::InternalError(absl::StrCat(where, ": ", FirstLine(e.what()))));
  }
}

}  // namespace skyrl::rl
