"""ray.util's names: placement groups and scheduling strategies (this package's
_placement.py), ActorPool, queue (Queue, Empty, Full) and get_node_ip_address."""

import socket

from . import placement_group, queue, scheduling_strategies
from .actor_pool import ActorPool
from .._missing import module_getattr

__all__ = ["ActorPool", "get_node_ip_address", "placement_group", "queue", "scheduling_strategies"]

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
