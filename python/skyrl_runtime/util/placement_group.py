"""ray.util.placement_group's names."""

from .._placement import PlacementGroup, placement_group, placement_group_table, remove_placement_group  # noqa: F401
