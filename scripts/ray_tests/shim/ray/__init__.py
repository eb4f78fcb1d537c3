"""`ray` for running Ray's own tests against skyrl_runtime (scripts/ray-tests): every name and
submodule is skyrl_runtime's (ray.X imports skyrl_runtime.X); only the test helpers Ray's tests
import from Ray's private modules (ray._private.test_utils, ray.test_utils) are written here.
Not part of the package: nothing imports it but scripts/ray-tests."""

import contextlib
import importlib
import importlib.abc
import importlib.util
import sys
import types

import cloudpickle

import skyrl_runtime

# Ray's names are the package's; ray.cloudpickle (Ray's copy of it) is cloudpickle.
globals().update({name: getattr(skyrl_runtime, name) for name in skyrl_runtime.__all__})
sys.modules["ray.cloudpickle"] = cloudpickle

_OWN = ("ray._private.test_utils", "ray._common.test_utils", "ray.test_utils", "ray.cluster_utils")
# Ray's internal modules: importable here, but whatever a test takes from them skips the test
# as "internal" when used (scripts/ray-tests leaves those out of the public-API pass rate).
INTERNAL_MODULES = ("_private", "_raylet", "_common", "autoscaler", "worker", "state", "internal",
                    "experimental", "core", "runtime_context", "dashboard", "job_config", "serialization",
                    "ray_constants", "services", "node", "parameter", "utils", "gcs_utils", "remote_function",
                    "tests", "scripts", "includes", "_version")


class _Internal:
    """Stands for a name of Ray's internals: using it skips the test."""

    def __init__(self, qualified):
        self._qualified = qualified

    def _skip(self, *args, **kwargs):
        import pytest
        # At a module's top (a constant read from Ray's internals) the file's tests all skip.
        pytest.skip(f"internal: {self._qualified} (Ray's internals)", allow_module_level=True)

    __call__ = _skip
    __iter__ = _skip
    __enter__ = _skip

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Internal(f"{self._qualified}.{name}")

    def __mro_entries__(self, bases):
        self._skip()


@contextlib.contextmanager
def _connect_to_client_or_not(connect_to_client):
    """Ray's test helper: the Ray client (not here) when asked for, else nothing."""
    if connect_to_client:
        import pytest
        pytest.skip("internal: the Ray client (ray.util.client)")
    yield


# Ray's test helpers that live in its internal modules, written here.
_HELPERS = {"ray.util.client.ray_client_helpers": {"connect_to_client_or_not": _connect_to_client_or_not}}


class _InternalModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Internal(f"{self.__name__}.{name}")


def _private_names_are_internal(module, ray_name):
    """A private name of Ray's (`_validate_bundles`, say) that the package's module lacks is a
    stand-in that skips the test using it; other missing names stay AttributeErrors."""
    if getattr(module, "_ray_tests_shimmed", False):
        return
    own = module.__dict__.get("__getattr__")

    def fallback(name):
        if name.startswith("_") and not name.startswith("__"):
            return _Internal(f"{ray_name}.{name}")
        if own is not None:
            return own(name)
        raise AttributeError(f"module {ray_name!r} has no attribute {name!r}")

    module.__getattr__ = fallback
    module._ray_tests_shimmed = True


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """ray.X is skyrl_runtime.X (the same module object), for every X the package has; a module
    of Ray's internals is a stand-in whose names skip the test that uses them."""

    def find_spec(self, name, path, target=None):
        if not name.startswith("ray.") or name.startswith(_OWN) or name in ("ray._private", "ray._common"):
            return None
        try:
            found = importlib.util.find_spec("skyrl_runtime." + name[4:])
        except (ImportError, AttributeError, ValueError):
            found = None
        if found:
            return importlib.util.spec_from_loader(name, self)
        if name.split(".")[1] in INTERNAL_MODULES or name.startswith("ray.util.client"):
            return importlib.util.spec_from_loader(name, self, is_package=True)
        return None

    def create_module(self, spec):
        try:
            module = importlib.import_module("skyrl_runtime." + spec.name[4:])
            _private_names_are_internal(module, spec.name)
            return module
        except ImportError:
            module = _InternalModule(spec.name)
            module.__path__ = []
            module.__dict__.update(_HELPERS.get(spec.name, {}))
            return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Alias())
# The package's modules already loaded, under Ray's names: importing ray.util.placement_group
# then finds it and leaves ray.util.placement_group (the function, as in Ray) alone.
for _name, _module in list(sys.modules.items()):
    if _name.startswith("skyrl_runtime.") and isinstance(_module, types.ModuleType):
        sys.modules.setdefault("ray." + _name[len("skyrl_runtime."):], _module)
        _private_names_are_internal(_module, "ray." + _name[len("skyrl_runtime."):])


def __getattr__(name):
    try:
        return getattr(skyrl_runtime, name)
    except AttributeError:
        if name in INTERNAL_MODULES:
            return importlib.import_module(f"ray.{name}")
        raise
