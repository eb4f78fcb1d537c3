"""Newer Ray keeps its test helpers in ray._common.test_utils: the shim's are in
ray._private.test_utils; every other name of ray._common is Ray's internals."""

import importlib


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return importlib.import_module(f"ray._common.{name}")
