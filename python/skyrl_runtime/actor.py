"""ray.actor's names: exit_actor(), ActorClassInheritanceException."""

from ._host import exit_actor


class ActorClassInheritanceException(TypeError):
    """A class that derives from a @remote class, which Ray does not support either: derive
    from the plain class and decorate the result."""


__all__ = ["ActorClassInheritanceException", "exit_actor"]
