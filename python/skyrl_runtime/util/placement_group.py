"""ray.util.placement_group's names."""

from .._placement import (VALID_PLACEMENT_GROUP_STRATEGIES, PlacementGroup, get_current_placement_group,
                          placement_group, placement_group_table, remove_placement_group, validate_placement_group)

# The label every node carries with its id (Ray's is "ray.io/node-id"): a label_selector or
# bundle selector of {NODE_ID_LABEL_KEY: node_id} pins to that node.
NODE_ID_LABEL_KEY = "skyrl.node-id"

__all__ = ["NODE_ID_LABEL_KEY", "VALID_PLACEMENT_GROUP_STRATEGIES", "PlacementGroup", "get_current_placement_group",
           "placement_group", "placement_group_table", "remove_placement_group", "validate_placement_group"]
