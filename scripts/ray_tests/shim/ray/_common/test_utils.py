"""Newer Ray's name for ray._private.test_utils: the same module."""

import sys

from ray._private import test_utils

sys.modules[__name__] = test_utils
