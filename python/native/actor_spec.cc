#include "python/native/actor_spec.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace skyrl::python {
namespace py = pybind11;
using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

namespace {

absl::Status Wrong(const std::string& what, const char* want, const py::handle& got) {
  return absl::InvalidArgumentError(absl::StrCat("spec.", what, ": wants ", want, ", got ",
                                                 std::string(py::str(got.get_type().attr("__name__")))));
}

// Sets singular field `f` of `m` (or, `add`, appends to repeated `f`) from `v`.
absl::Status SetScalar(Message& m, const FieldDescriptor* f, const py::handle& v, const std::string& what,
                       bool add) {
  const Reflection* r = m.GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING: {
      if (!py::isinstance<py::str>(v) && !py::isinstance<py::bytes>(v)) return Wrong(what, "str or bytes", v);
      std::string s = py::isinstance<py::bytes>(v) ? std::string(py::reinterpret_borrow<py::bytes>(v))
                                                   : v.cast<std::string>();
      add ? r->AddString(&m, f, std::move(s)) : r->SetString(&m, f, std::move(s));
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64: {
      if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v)) return Wrong(what, "int", v);
      const long long n = v.cast<long long>();
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
        if (n < INT32_MIN || n > INT32_MAX)
          return absl::InvalidArgumentError(absl::StrCat("spec.", what, ": out of range"));
        add ? r->AddInt32(&m, f, int32_t(n)) : r->SetInt32(&m, f, int32_t(n));
      } else {
        add ? r->AddInt64(&m, f, n) : r->SetInt64(&m, f, n);
      }
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_DOUBLE:
      if (!py::isinstance<py::float_>(v) && !(py::isinstance<py::int_>(v) && !py::isinstance<py::bool_>(v)))
        return Wrong(what, "a number", v);
      add ? r->AddDouble(&m, f, v.cast<double>()) : r->SetDouble(&m, f, v.cast<double>());
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_BOOL:
      if (!py::isinstance<py::bool_>(v)) return Wrong(what, "bool", v);
      add ? r->AddBool(&m, f, v.cast<bool>()) : r->SetBool(&m, f, v.cast<bool>());
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(absl::StrCat("spec.", what, ": this kind of field is not bound"));
  }
}

absl::Status Fill(Message& m, const py::dict& d, const std::string& prefix);

absl::Status SetField(Message& m, const FieldDescriptor* f, const py::handle& v, const std::string& what) {
  const Reflection* r = m.GetReflection();
  if (f->is_map()) {
    if (!py::isinstance<py::dict>(v)) return Wrong(what, "a dict", v);
    const Descriptor* entry = f->message_type();
    for (const auto& [key, value] : py::reinterpret_borrow<py::dict>(v)) {
      Message* e = r->AddMessage(&m, f);
      const std::string where = absl::StrCat(what, "[", std::string(py::str(key)), "]");
      if (absl::Status s = SetScalar(*e, entry->FindFieldByName("key"), key, where, false); !s.ok()) return s;
      if (absl::Status s = SetScalar(*e, entry->FindFieldByName("value"), value, where, false); !s.ok())
        return s;
    }
    return absl::OkStatus();
  }
  if (f->is_repeated()) {
    if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v)) return Wrong(what, "a list", v);
    size_t i = 0;
    for (const py::handle item : v) {
      const std::string where = absl::StrCat(what, "[", i++, "]");
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        if (!py::isinstance<py::dict>(item)) return Wrong(where, "a dict", item);
        if (absl::Status s = Fill(*r->AddMessage(&m, f), py::reinterpret_borrow<py::dict>(item), where + ".");
            !s.ok())
          return s;
      } else if (absl::Status s = SetScalar(m, f, item, where, true); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }
  if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    if (!py::isinstance<py::dict>(v)) return Wrong(what, "a dict", v);
    return Fill(*r->MutableMessage(&m, f), py::reinterpret_borrow<py::dict>(v), what + ".");
  }
  return SetScalar(m, f, v, what, false);
}

absl::Status Fill(Message& m, const py::dict& d, const std::string& prefix) {
  const Descriptor* desc = m.GetDescriptor();
  for (const auto& [key, value] : d) {
    if (!py::isinstance<py::str>(key))
      return absl::InvalidArgumentError(absl::StrCat("spec.", prefix, ": keys are field names (str)"));
    const std::string name = key.cast<std::string>();
    const FieldDescriptor* f = desc->FindFieldByName(name);
    if (f == nullptr)
      return absl::InvalidArgumentError(
          absl::StrCat("spec.", prefix, name, ": no such field of ", desc->name()));
    if (value.is_none()) continue;
    if (absl::Status s = SetField(m, f, value, prefix + name); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::ActorSpec> SpecFromDict(const py::dict& d) {
  v1::ActorSpec spec;
  if (absl::Status s = Fill(spec, d, ""); !s.ok()) return s;
  return spec;
}

}  // namespace skyrl::python
