// _native.weight_sync: the weight-sync bindings (weight_sync.cc), added to the _native module.
#pragma once

#include <pybind11/pybind11.h>

namespace skyrl::python {

// Adds the submodule "weight_sync" to `parent`; `error` is _native.Error (borrowed, kept for the
// process's life), raised for every absl::Status that is not OK.
void BindWeightSync(pybind11::module_& parent, PyObject* error);

}  // namespace skyrl::python
