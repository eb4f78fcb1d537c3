"""Older Ray's name for ray._private.test_utils."""

from ray._private.test_utils import *  # noqa: F401,F403
