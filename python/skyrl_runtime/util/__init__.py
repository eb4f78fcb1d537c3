"""ray.util's names: placement groups and scheduling strategies (this package's
_placement.py), ActorPool, queue (Queue, Empty, Full) and get_node_ip_address."""

import socket

from . import queue, scheduling_strategies
from .actor_pool import ActorPool
from .._missing import module_getattr
# As in Ray, ray.util.placement_group is the function (the module stays importable by name).
from .placement_group import (get_current_placement_group, placement_group, placement_group_table,
                              remove_placement_group)

__all__ = ["ActorPool", "get_current_placement_group", "get_node_ip_address", "placement_group",
           "placement_group_table", "queue", "remove_placement_group", "scheduling_strategies"]

__getattr__ = module_getattr("util.")


def get_node_ip_address():
    """This machine's address as other nodes reach it: the source address of a route out (no
    packet is sent), else 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            return s.getsockname()[0]
        except OSError:
            return "127.0.0.1"
