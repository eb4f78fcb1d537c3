"""ray.util.placement_group's names."""

from .._placement import (PlacementGroup, get_current_placement_group, placement_group, placement_group_table,
                          remove_placement_group)

__all__ = ["PlacementGroup", "get_current_placement_group", "placement_group", "placement_group_table",
           "remove_placement_group"]
