"""ray.util.scheduling_strategies' names."""

from .._placement import PlacementGroupSchedulingStrategy  # noqa: F401
