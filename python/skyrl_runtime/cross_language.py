"""Actors written in C++ (ray.cross_language): classes registered with SKYRL_REGISTER_ACTOR in
an actor host (skyrl-actor-host's built-in echo, counter, sleep, crash; host "rl" for the
RL roles). Arguments and results are bytes."""

from ._actors import CppActorClass


def cpp_actor_class(class_name: str, host: str = "") -> CppActorClass:
    """The C++ class `class_name`, served by the actor host `host` ("" the built-in one)."""
    if not class_name:
        raise ValueError("cpp_actor_class: class_name is empty")
    return CppActorClass(class_name, host)
