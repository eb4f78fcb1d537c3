// An actor's spec from Python: a dict whose keys are v1::ActorSpec's field names, bound once
// by the proto's descriptor, so an option added to actor_spec.proto needs no binding code.
#pragma once

#include <pybind11/pybind11.h>

#include "absl/status/statusor.h"
#include "skyrl/actor_spec.pb.h"

namespace skyrl::python {

// Keys: the field names (`namespace`, `label_selector`, ...). Scalars take str, bytes, int,
// float or bool as the field's type; maps take dicts; `fallback_label_selectors` a list of
// {"labels": {...}}; None leaves a field unset. InvalidArgument naming the key for an unknown
// key or a value of the wrong kind.
absl::StatusOr<v1::ActorSpec> SpecFromDict(const pybind11::dict& d);

}  // namespace skyrl::python
