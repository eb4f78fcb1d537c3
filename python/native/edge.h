// The edge between absl::Status and Python for the _native module's files: Raise turns a status
// into skyrl_runtime._native.Error(code, message), `code` the canonical name ("UNAVAILABLE",
// ...), so that Python decides on codes as C++ does. Call with the GIL held.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace skyrl::python {

// The Error class, set once at import (PYBIND11_MODULE) and never freed: Python may outlive
// static destructors.
inline PyObject* g_error = nullptr;

[[noreturn]] inline void Raise(const absl::Status& s) {
  namespace py = pybind11;
  py::object e = py::reinterpret_borrow<py::object>(g_error)(absl::StatusCodeToString(s.code()),
                                                             std::string(s.message()));
  PyErr_SetObject(g_error, e.ptr());
  throw py::error_already_set();
}

inline void Check(const absl::Status& s) {
  if (!s.ok()) Raise(s);
}

template <typename T>
T Unwrap(absl::StatusOr<T> v) {
  if (!v.ok()) Raise(v.status());
  return std::move(*v);
}

// Python's float seconds, to the millisecond.
inline absl::Duration Seconds(double s) { return absl::Milliseconds(static_cast<int64_t>(s * 1000)); }

}  // namespace skyrl::python
