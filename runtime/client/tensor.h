// Tensors as actor call arguments and results, without LibTorch: a dtype name, a shape and
// the raw row-major bytes, checked for consistency both ways. rl/ converts these to and
// from torch::Tensor; everything else (drivers, the CLI, tests) can build and read them.
//
//   skyrl::TensorBytes t{"float32", {2, 3}, bytes};
//   auto reply = client.CallProto<v1::Tensor>(actor, "forward", *skyrl::ToProto(t));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "skyrl/tensor.pb.h"

namespace skyrl {

struct TensorBytes {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string data;
};

// Bytes per element of a dtype name; InvalidArgument for an unknown one.
absl::StatusOr<int> ElementSize(const std::string& dtype);
// Checks dtype, shape (no negative dimension, no overflow) and that data has exactly the
// bytes they imply. Errors name the field.
absl::Status Validate(const TensorBytes& t);
absl::StatusOr<v1::Tensor> ToProto(const TensorBytes& t);
absl::StatusOr<TensorBytes> FromProto(const v1::Tensor& t);

}  // namespace skyrl
