"""`ray` for running Ray's own tests against skyrl_runtime (scripts/ray-tests): every name and
submodule is skyrl_runtime's (ray.X imports skyrl_runtime.X); only the test helpers Ray's tests
import from Ray's private modules (ray._private.test_utils, ray.test_utils) are written here.
Not part of the package: nothing imports it but scripts/ray-tests."""

import importlib
import importlib.abc
import importlib.util
import sys
import types

import skyrl_runtime
from skyrl_runtime import *  # noqa: F401,F403 - Ray's names are the package's

_OWN = ("ray._private.test_utils", "ray.test_utils")
# Ray's internal modules: importable here, but whatever a test takes from them skips the test
# as "internal" when used (scripts/ray-tests leaves those out of the public-API pass rate).
INTERNAL_MODULES = ("_private", "_raylet", "_common", "cluster_utils", "autoscaler", "worker", "state", "internal",
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


class _InternalModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Internal(f"{self.__name__}.{name}")


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """ray.X is skyrl_runtime.X (the same module object), for every X the package has; a module
    of Ray's internals is a stand-in whose names skip the test that uses them."""

    def find_spec(self, name, path, target=None):
        if not name.startswith("ray.") or name.startswith(_OWN) or name == "ray._private":
            return None
        try:
            found = importlib.util.find_spec("skyrl_runtime." + name[4:])
        except (ImportError, AttributeError, ValueError):
            found = None
        if found:
            return importlib.util.spec_from_loader(name, self)
        if name.split(".")[1] in INTERNAL_MODULES:
            return importlib.util.spec_from_loader(name, self, is_package=True)
        return None

    def create_module(self, spec):
        try:
            return importlib.import_module("skyrl_runtime." + spec.name[4:])
        except ImportError:
            module = _InternalModule(spec.name)
            module.__path__ = []
            return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Alias())


def __getattr__(name):
    try:
        return getattr(skyrl_runtime, name)
    except AttributeError:
        if name in INTERNAL_MODULES:
            return importlib.import_module(f"ray.{name}")
        raise
