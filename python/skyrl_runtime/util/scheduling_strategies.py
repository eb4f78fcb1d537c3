"""ray.util.scheduling_strategies' names."""

from .._placement import NodeAffinitySchedulingStrategy, PlacementGroupSchedulingStrategy  # noqa: F401
