"""A value that is "the active one" for the length of a block, one context variable each.

The graph being registered, the pipeline being run and the resolver at work are all bound and looked up
the same way.

Examples:
    >>> current_name = Scoped[str]("name", lambda: LookupError("no name here"))
    >>> with current_name.bind("clicks"):
    ...     current_name.get()
    'clicks'
    >>> current_name.peek() is None
    True

"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Generic, TypeVar

T = TypeVar("T")


class Scoped(Generic[T]):
    """The active ``T`` of the enclosing :meth:`bind` block.

    Args:
        name: The context variable's name.
        missing: The error :meth:`get` raises outside any block.

    """

    def __init__(self, name: str, missing: Callable[[], Exception]) -> None:
        self._var: ContextVar[T | None] = ContextVar(f"deltaflow_{name}", default=None)
        self._missing = missing

    @contextmanager
    def bind(self, value: T) -> Iterator[T]:
        """Make ``value`` the active one inside the block."""
        token = self._var.set(value)
        try:
            yield value
        finally:
            self._var.reset(token)

    def get(self) -> T:
        """The active value; the ``missing`` error outside any block."""
        value = self._var.get()
        if value is None:
            raise self._missing()
        return value

    def peek(self) -> T | None:
        """The active value, or None."""
        return self._var.get()
