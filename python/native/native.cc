// skyrl_runtime._native: the Python package's native part, a thin pybind11 layer over the C++
// client (runtime/client/client.h). Calls, streams, deadlines, ordering and restarts have one
// implementation, in C++; this file converts arguments and errors at the edge. Every call
// that may wait releases the GIL.
//
// Errors: absl::Status becomes skyrl_runtime._native.Error(code, message), `code` the
// canonical name ("UNAVAILABLE", "NOT_FOUND", ...), so Python decides on codes as C++ does.
#include <pybind11/eval.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/actor/actor.h"
#include "runtime/actor/host.h"
#include "runtime/daemons/daemons.h"
#include "runtime/client/client.h"
#include "runtime/common/job_metrics_keys.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/status.h"
#include "skyrl/node.grpc.pb.h"
#include "skyrl/placement_group.grpc.pb.h"
#include "python/native/actor_spec.h"
#include "python/native/edge.h"
#include "python/native/weight_sync.h"

namespace py = pybind11;

namespace skyrl::python {
namespace {

// Bytes owned by C++ and lent to Python through the buffer protocol, writable: a call's
// result (or a Python actor's args) read by pickle with out-of-band buffers and by
// torch.frombuffer without a copy. memoryview(blob) keeps it alive.
struct Blob {
  std::string data;
};

// The bytes of `payload`: a bytes-like object, or a list or tuple of them (a header and
// pickle protocol 5 buffers), joined into one string. Large copies run without the GIL.
std::string Join(const py::handle& payload) {
  if (PyBytes_Check(payload.ptr()))
    return std::string(PyBytes_AS_STRING(payload.ptr()), PyBytes_GET_SIZE(payload.ptr()));
  std::vector<py::buffer_info> parts;
  if (py::isinstance<py::list>(payload) || py::isinstance<py::tuple>(payload)) {
    for (py::handle item : payload) parts.push_back(py::reinterpret_borrow<py::buffer>(item).request());
  } else {
    parts.push_back(py::reinterpret_borrow<py::buffer>(payload).request());
  }
  size_t total = 0;
  for (const py::buffer_info& b : parts) {
    if (b.ndim > 1 && b.strides.back() != b.itemsize)
      throw py::value_error("a buffer of a call's payload is not contiguous");
    total += size_t(b.size * b.itemsize);
  }
  std::string out;
  out.resize(total);
  auto copy = [&] {
    size_t at = 0;
    for (const py::buffer_info& b : parts) {
      std::memcpy(out.data() + at, b.ptr, size_t(b.size * b.itemsize));
      at += size_t(b.size * b.itemsize);
    }
  };
  if (total >= (1 << 20)) {
    py::gil_scoped_release release;
    copy();
  } else {
    copy();
  }
  return out;
}

// A call in flight: the C++ future, resolved once and kept (result() may be asked again).
class CallFuture {
 public:
  explicit CallFuture(std::future<absl::StatusOr<std::string>> f) : f_(std::move(f)) {}
  // Whether the result is here, without waiting.
  bool done() {
    if (result_) return true;
    return f_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }
  // The result bytes; waits at most `timeout` seconds (None: as long as the call's own
  // deadline). A wait that runs out raises Error("DEADLINE_EXCEEDED") and leaves the call
  // going: result() may be asked again.
  py::bytes result(std::optional<double> timeout) {
    Wait(timeout);
    return py::bytes((**result_)->data);
  }
  // The result as a Blob, without a copy (the same one each time).
  std::shared_ptr<Blob> view(std::optional<double> timeout) {
    Wait(timeout);
    return **result_;
  }

 private:
  void Wait(std::optional<double> timeout) {
    if (!result_) {
      bool ready = true;
      {
        py::gil_scoped_release release;
        if (timeout) {
          ready = f_.wait_for(std::chrono::milliseconds(static_cast<int64_t>(*timeout * 1000))) ==
                  std::future_status::ready;
        } else {
          f_.wait();
        }
      }
      // Another thread may have taken the result while this one waited without the GIL: the
      // future can be read once only.
      if (!result_) {
        if (!ready)
          Raise(absl::DeadlineExceededError(absl::StrCat("get: no result within ", *timeout, " s")));
        absl::StatusOr<std::string> r = f_.get();
        if (r.ok()) {
          result_ = std::make_shared<Blob>(Blob{std::move(*r)});
        } else {
          result_ = r.status();
        }
      }
    }
    if (!result_->ok()) Raise(result_->status());
  }

  std::future<absl::StatusOr<std::string>> f_;
  std::optional<absl::StatusOr<std::shared_ptr<Blob>>> result_;
};

py::dict ActorDict(const v1::ActorInfo& a) {
  py::dict d;
  d["actor_id"] = a.actor_id();
  d["class_name"] = a.spec().class_name();
  d["max_pending_calls"] = a.spec().max_pending_calls();
  d["name"] = a.spec().name();
  d["namespace"] = a.spec().namespace_();
  std::string state = v1::ActorState_Name(a.state());
  d["state"] = state.rfind("ACTOR_", 0) == 0 ? state.substr(6) : state;
  d["node_id"] = a.node_id();
  d["address"] = a.address();
  d["gpu_ids"] = std::vector<int>(a.gpu_ids().begin(), a.gpu_ids().end());
  d["restarts"] = a.restarts();
  d["death_reason"] = a.death_reason();
  d["pending_reason"] = a.pending_reason();
  return d;
}

py::dict GroupDict(const v1::PlacementGroupInfo& g) {
  py::dict d;
  d["placement_group_id"] = g.placement_group_id();
  d["name"] = g.spec().name();
  d["namespace"] = g.spec().namespace_();
  d["strategy"] = v1::PlacementStrategy_Name(g.spec().strategy());
  std::string state = v1::PlacementGroupState_Name(g.state());
  d["state"] = state.rfind("PG_", 0) == 0 ? state.substr(3) : state;
  d["pending_reason"] = g.pending_reason();
  py::list bundles;
  for (int i = 0; i < g.spec().bundles_size(); ++i) {
    py::dict b;
    b["resources"] = std::map<std::string, double>(g.spec().bundles(i).resources().begin(),
                                                   g.spec().bundles(i).resources().end());
    b["node_id"] = i < g.bundles_size() ? g.bundles(i).node_id() : std::string();
    b["gpu_ids"] = i < g.bundles_size()
                       ? std::vector<int>(g.bundles(i).gpu_ids().begin(), g.bundles(i).gpu_ids().end())
                       : std::vector<int>();
    bundles.append(b);
  }
  d["bundles"] = bundles;
  return d;
}

// The head's node table (NodeService.ListNodes), as dicts.
py::list ListNodes(const std::string& address, const std::string& token, double timeout) {
  v1::ListNodesReply reply;
  absl::Status s;
  {
    py::gil_scoped_release release;
    if (s = rpc::ValidateAddress("address", address); s.ok()) {
      auto stub = v1::NodeService::NewStub(rpc::MakeChannel(address));
      grpc::ClientContext ctx;
      rpc::PrepareCall(&ctx, token, Seconds(timeout));
      s = rpc::FromGrpc(stub->ListNodes(&ctx, v1::ListNodesRequest(), &reply));
    }
  }
  if (!s.ok()) Raise(s);
  py::list out;
  for (const v1::NodeInfo& n : reply.nodes()) {
    py::dict d;
    d["node_id"] = n.node_id();
    d["alive"] = n.state() == v1::NODE_ALIVE;
    d["hostname"] = n.hostname();
    d["address"] = n.address();
    d["pid"] = n.pid();
    d["resources"] = std::map<std::string, double>(n.resources_total().begin(), n.resources_total().end());
    d["resources_available"] =
        std::map<std::string, double>(n.resources_available().begin(), n.resources_available().end());
    d["labels"] = std::map<std::string, std::string>(n.labels().begin(), n.labels().end());
    d["gpu_ids"] = std::vector<int>(n.gpu_ids().begin(), n.gpu_ids().end());
    d["death_reason"] = n.death_reason();
    out.append(d);
  }
  return out;
}

// One placement group by id (PlacementGroupService.GetPlacementGroup), as a dict.
py::dict GetPlacementGroup(const std::string& address, const std::string& token, const std::string& id) {
  v1::GetPlacementGroupReply reply;
  absl::Status s;
  {
    py::gil_scoped_release release;
    auto stub = v1::PlacementGroupService::NewStub(rpc::MakeChannel(address));
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, token, absl::Seconds(10));
    v1::GetPlacementGroupRequest req;
    req.set_placement_group_id(id);
    s = rpc::FromGrpc(stub->GetPlacementGroup(&ctx, req, &reply));
  }
  if (!s.ok()) Raise(s);
  return GroupDict(reply.group());
}

// The GIL, from a thread the C++ host made (an executor). For a thread without a Python thread
// state pybind11's gil_scoped_acquire makes one and deletes it again at release, and in 3.11
// that maps and unmaps the thread's frame stack each time: the munmaps' TLB shootdowns were
// most of a Python call's cost. The first acquire on a thread keeps its state for the thread's
// life (one per executor thread; the interpreter clears them at exit).
class HostThreadGil {
 public:
  HostThreadGil() {
    thread_local bool kept = false;
    if (!kept) {
      gil_.inc_ref();
      kept = true;
    }
  }

 private:
  py::gil_scoped_acquire gil_;
};

// A Python object as an actor: created and called through the Python host's functions
// (skyrl_runtime._host), each call holding the GIL.
class PyActor : public Actor {
 public:
  explicit PyActor(py::object obj) : obj_(std::move(obj)) {}
  ~PyActor() override {
    py::gil_scoped_acquire gil;
    obj_ = py::object();
  }
  py::object& obj() { return obj_; }

 private:
  py::object obj_;
};

// The text of the Python exception being handled, for a status.
std::string Describe(const py::error_already_set& e) { return e.what(); }

// skyrl-actor-host for Python actors: registers the class "python" (created by `create`,
// every method called through `dispatch`) and runs the C++ host with `argv`, without the GIL.
int RunPythonHost(const std::vector<std::string>& argv, py::object create, py::object dispatch) {
  auto create_fn = std::make_shared<py::object>(std::move(create));
  auto dispatch_fn = std::make_shared<py::object>(std::move(dispatch));
  ActorClass cls;
  cls.name = "python";
  cls.create = [create_fn](absl::string_view init) -> absl::StatusOr<std::unique_ptr<Actor>> {
    py::gil_scoped_acquire gil;
    try {
      return std::unique_ptr<Actor>(new PyActor((*create_fn)(py::bytes(init.data(), init.size()))));
    } catch (const py::error_already_set& e) {
      return absl::FailedPreconditionError(Describe(e));
    }
  };
  cls.any_method = [dispatch_fn](Actor& self, absl::string_view method,
                                 absl::string_view args) -> absl::StatusOr<std::string> {
    HostThreadGil gil;
    try {
      auto blob = std::make_shared<Blob>(Blob{std::string(args)});
      py::object out = (*dispatch_fn)(static_cast<PyActor&>(self).obj(), std::string(method), blob);
      return Join(out);
    } catch (const py::error_already_set& e) {
      return absl::InternalError(absl::StrCat("the Python host failed: ", Describe(e)));
    }
  };
  ActorRegistry::Get().Register(std::move(cls));
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  py::gil_scoped_release release;
  return RunActorHost(static_cast<int>(argv.size()), args.data());
}

}  // namespace
}  // namespace skyrl::python

PYBIND11_MODULE(_native, m) {
  using namespace skyrl;
  using namespace skyrl::python;
  m.doc() = "SkyRL Runtime's C++ client, for the skyrl_runtime package";
  py::dict scope = m.attr("__dict__");
  py::exec(R"(
class Error(RuntimeError):
    """An error from the runtime: `code` is the canonical status name (e.g. "UNAVAILABLE")."""
    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
)",
           scope);
  g_error = m.attr("Error").ptr();
  Py_INCREF(g_error);
  BindWeightSync(m);

  py::class_<Blob, std::shared_ptr<Blob>>(m, "Blob", py::buffer_protocol())
      .def_buffer([](Blob& b) {
        return py::buffer_info(b.data.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {py::ssize_t(b.data.size())}, {py::ssize_t(1)}, /*readonly=*/false);
      })
      .def("__len__", [](const Blob& b) { return b.data.size(); });

  py::class_<CallFuture, std::shared_ptr<CallFuture>>(m, "CallFuture")
      .def("done", &CallFuture::done)
      .def("result", &CallFuture::result, py::arg("timeout") = py::none(), "the result as bytes (a copy)")
      .def("view", &CallFuture::view, py::arg("timeout") = py::none(),
           "the result as a writable Blob (memoryview(blob)), without a copy");

  py::class_<Client, std::shared_ptr<Client>>(m, "Client")
      .def_static(
          "connect",
          [](const std::string& address, const std::string& token, double call_timeout,
             std::optional<uint64_t> max_call_bytes) {
            if (!(call_timeout > 0 && call_timeout < 1e9))
              throw py::value_error("connect: call_timeout must be a positive number of seconds");
            ClientOptions o;
            o.call_timeout = Seconds(call_timeout);
            if (max_call_bytes) {
              o.max_call_bytes = *max_call_bytes;
              // A limit below one message's size makes the message that size.
              o.max_message_bytes = std::min<size_t>(o.max_message_bytes, *max_call_bytes);
            }
            std::unique_ptr<Client> c = Unwrap(Client::Connect(address, token, o));
            return std::shared_ptr<Client>(std::move(c));
          },
          py::arg("address"), py::arg("token"), py::arg("call_timeout") = 60.0,
          py::arg("max_call_bytes") = py::none(),
          "call_timeout: seconds each request to the head may take; max_call_bytes: the largest "
          "arguments (and result) of an actor call (None: ClientOptions' default)")
      .def(
          "create_actor",
          [](Client& c, const py::dict& spec, bool return_pending) {
            v1::ActorSpec s = Unwrap(SpecFromDict(spec));
            absl::StatusOr<ActorHandle> h;
            {
              py::gil_scoped_release release;
              h = c.CreateActor(std::move(s), return_pending);
            }
            return Unwrap(std::move(h)).actor_id;
          },
          py::arg("spec"), py::arg("return_pending") = false,
          "creates an actor from a dict of v1::ActorSpec's fields (actor_spec.proto); its id")
      .def(
          "upload_working_dir",
          [](Client& c, const std::string& dir) {
            absl::StatusOr<std::string> digest;
            {
              py::gil_scoped_release release;
              digest = c.UploadWorkingDir(dir);
            }
            return Unwrap(std::move(digest));
          },
          py::arg("dir"), "packs a folder and stores it on the head once; its digest for create_actor")
      .def(
          "call_async",
          [](Client& c, const std::string& actor_id, const std::string& method, py::object args,
             std::optional<double> timeout, int retries, const std::string& retry_tags) {
            std::string a = Join(args);
            CallOptions o;
            // As in Ray, a call without a timeout has no deadline: get(timeout=) bounds the
            // wait, not the call, and a training step may take an hour.
            o.timeout = timeout ? Seconds(*timeout) : absl::InfiniteDuration();
            o.retries = retries;
            o.pending_limit = false;  // each handle counts its own (_actors.py)
            if (!retry_tags.empty())
              o.retry_result = [retry_tags](const std::string& r) {
                return !r.empty() && retry_tags.find(r[0]) != std::string::npos;
              };
            std::future<absl::StatusOr<std::string>> f;
            {
              py::gil_scoped_release release;
              f = c.CallAsync(ActorHandle{actor_id}, method, a, std::move(o));
            }
            return std::make_shared<CallFuture>(std::move(f));
          },
          py::arg("actor_id"), py::arg("method"), py::arg("args") = py::bytes(),
          py::arg("timeout") = py::none(), py::arg("retries") = 0, py::arg("retry_tags") = std::string(),
          "Calls the method; never waits. `retries` is max_task_retries (-1: without end); a result "
          "whose first byte is one of `retry_tags` is made again as a failure would be (retry_exceptions)")
      .def(
          "kv_put",
          [](Client& c, const std::string& key, const std::string& value) {
            absl::Status s;
            {
              py::gil_scoped_release release;
              s = c.KvPut(key, value);
            }
            if (!s.ok()) Raise(s);
          },
          py::arg("key"), py::arg("value"), "stores value under key in the head's KV store")
      .def(
          "kv_get",
          [](Client& c, const std::string& key) {
            absl::StatusOr<std::string> v;
            {
              py::gil_scoped_release release;
              v = c.KvGet(key);
            }
            return py::bytes(Unwrap(std::move(v)));
          },
          py::arg("key"), "the value under key in the head's KV store (Error NOT_FOUND when absent)")
      .def(
          "get_actor",
          [](Client& c, const std::string& name, const std::string& ns) {
            absl::StatusOr<ActorHandle> h;
            {
              py::gil_scoped_release release;
              h = c.GetActor(name, ns);
            }
            return Unwrap(std::move(h)).actor_id;
          },
          py::arg("name"), py::arg("namespace") = "default")
      .def("describe",
           [](Client& c, const std::string& actor_id) {
             absl::StatusOr<v1::ActorInfo> info;
             {
               py::gil_scoped_release release;
               info = c.Describe(ActorHandle{actor_id});
             }
             return ActorDict(Unwrap(std::move(info)));
           })
      .def(
          "create_placement_group",
          [](Client& c, const std::vector<std::map<std::string, double>>& bundles,
             const std::string& strategy, const std::string& name, const std::string& ns, bool wait_for_nodes,
             bool detached) {
            PlacementGroupOptions o;
            for (const auto& b : bundles) o.bundles.push_back(Bundle{b, {}});
            if (!v1::PlacementStrategy_Parse(strategy, &o.strategy))
              Raise(absl::InvalidArgumentError(absl::StrCat(
                  "strategy: \"", strategy, "\" is not PACK, SPREAD, STRICT_PACK or STRICT_SPREAD")));
            o.name = name;
            o.ns = ns;
            o.wait_for_nodes = wait_for_nodes;
            o.detached = detached;
            absl::StatusOr<v1::PlacementGroupInfo> g;
            {
              py::gil_scoped_release release;
              g = c.CreatePlacementGroup(o);
            }
            return GroupDict(Unwrap(std::move(g)));
          },
          py::arg("bundles"), py::arg("strategy") = "PACK", py::arg("name") = "",
          py::arg("namespace") = "default", py::arg("wait_for_nodes") = false, py::arg("detached") = false)
      .def(
          "wait_placement_group",
          [](Client& c, const std::string& id, double timeout) {
            absl::StatusOr<v1::PlacementGroupInfo> g;
            {
              py::gil_scoped_release release;
              g = c.WaitPlacementGroup(id, Seconds(timeout));
            }
            return GroupDict(Unwrap(std::move(g)));
          },
          py::arg("placement_group_id"), py::arg("timeout"))
      .def("remove_placement_group",
           [](Client& c, const std::string& id) {
             absl::Status s;
             {
               py::gil_scoped_release release;
               s = c.RemovePlacementGroup(id);
             }
             if (!s.ok()) Raise(s);
           })
      .def(
          "set_blocked",
          [](Client& c, const std::string& actor_id, bool blocked) {
            absl::StatusOr<bool> holds;
            {
              py::gil_scoped_release release;
              holds = c.SetBlocked(ActorHandle{actor_id}, blocked);
            }
            return Unwrap(std::move(holds));
          },
          py::arg("actor_id"), py::arg("blocked"),
          "Ray's blocked tasks: lend (blocked) or take back this actor's CPU; whether it holds it")
      .def(
          "kill",
          [](Client& c, const std::string& actor_id, bool restart) {
            absl::Status s;
            {
              py::gil_scoped_release release;
              s = restart ? c.Restart(ActorHandle{actor_id}) : c.Kill(ActorHandle{actor_id});
            }
            if (!s.ok()) Raise(s);
          },
          py::arg("actor_id"), py::arg("restart") = false);

  m.def("list_nodes", &ListNodes, py::arg("address"), py::arg("token"), py::arg("timeout") = 5.0,
        "the head's node table");
  m.def("get_placement_group", &GetPlacementGroup, py::arg("address"), py::arg("token"),
        py::arg("placement_group_id"), "one placement group, as the head has it");
  m.def("job_metrics_key", &JobMetricsKey, py::arg("job_id"), py::arg("step"),
        "where a job's step record lives in the head's KV store (runtime/common/job_metrics_keys.h)");
  m.def(
      "prepare_actor_host",
      [] {
        py::gil_scoped_release release;
        PrepareActorHost();
      },
      "does ahead of run_actor_host what needs no arguments (gRPC's start-up)");
  m.def("run_actor_host", &RunPythonHost, py::arg("argv"), py::arg("create"), py::arg("dispatch"),
        "serves one Python actor as skyrl-actor-host does (the worker's host \"python\")");
  m.def(
      "load_token", [](const std::string& token_file) { return Unwrap(rpc::LoadToken(token_file, false)); },
      py::arg("token_file") = "",
      "the cluster token as the CLI finds it: the file, $SKYRL_TOKEN, ~/.skyrl/token");
  m.def("started_head_address", &daemons::StartedHeadAddress,
        "the address of the head `skyrl start --head` runs on this machine (~/.skyrl/run), or \"\"");
}
