"""Ray's private modules: test_utils is written here (the helpers Ray's tests import); any
other name is one of Ray's internals, which skips the test that uses it."""

import importlib


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return importlib.import_module(f"ray._private.{name}")
