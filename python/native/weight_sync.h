// _native.weight_sync: the weight-sync bindings (weight_sync.cc), added to the _native module.
#pragma once

#include <pybind11/pybind11.h>

namespace skyrl::python {

// Adds the submodule "weight_sync" to `parent` (after g_error is set, python/native/edge.h).
void BindWeightSync(pybind11::module_& parent);

}  // namespace skyrl::python
