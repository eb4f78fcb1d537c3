"""ray.util.collective is not supported: see the error."""

from .._missing import missing

raise missing("util.collective")
