#include "runtime/client/tensor.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace skyrl {

absl::StatusOr<int> ElementSize(const std::string& dtype) {
  if (dtype == "float32" || dtype == "int32") return 4;
  if (dtype == "float16" || dtype == "bfloat16") return 2;
  if (dtype == "int64" || dtype == "float64") return 8;
  if (dtype == "float8_e4m3fn" || dtype == "int8" || dtype == "uint8" || dtype == "bool") return 1;
  return absl::InvalidArgumentError(
      absl::StrCat("tensor.dtype: unknown dtype \"", dtype.substr(0, 32), "\""));
}

absl::Status Validate(const TensorBytes& t) {
  absl::StatusOr<int> size = ElementSize(t.dtype);
  if (!size.ok()) return size.status();
  if (t.shape.size() > 16) return absl::InvalidArgumentError("tensor.shape: more than 16 dimensions");
  int64_t elements = 1;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (t.shape[i] < 0) return absl::InvalidArgumentError(absl::StrCat("tensor.shape[", i, "]: negative"));
    if (t.shape[i] > 0 && elements > std::numeric_limits<int64_t>::max() / 8 / t.shape[i])
      return absl::InvalidArgumentError("tensor.shape: too many elements");
    elements *= t.shape[i];
  }
  if (int64_t(t.data.size()) != elements * *size)
    return absl::InvalidArgumentError(absl::StrCat("tensor.data: ", t.data.size(), " bytes, but ", t.dtype,
                                                   " with ", elements, " elements needs ", elements * *size));
  return absl::OkStatus();
}

absl::StatusOr<v1::Tensor> ToProto(const TensorBytes& t) {
  if (absl::Status s = Validate(t); !s.ok()) return s;
  v1::Tensor p;
  p.set_dtype(t.dtype);
  for (int64_t d : t.shape) p.add_shape(d);
  p.set_data(t.data);
  return p;
}

absl::StatusOr<TensorBytes> FromProto(const v1::Tensor& p) {
  TensorBytes t{p.dtype(), {p.shape().begin(), p.shape().end()}, p.data()};
  if (absl::Status s = Validate(t); !s.ok()) return s;
  return t;
}

}  // namespace skyrl
