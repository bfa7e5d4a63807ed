"""The resolver at work: which pipeline's flow is being built right now.

A flow's inputs are only known once its function runs. The reads inside it (``dp.read_stream``,
``spark.readStream.table``, ``dp.read_kafka`` ...) ask this module for the resolver at work and tell it
what they read. This module is the one owner of that state; sources import it, never the resolver, so
``import deltaflow`` loads no resolver and there is no import cycle.

Examples:
    >>> with resolving(resolver):  # doctest: +SKIP
    ...     df = flow.func()        # reads inside call active_resolver().read(...)

"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deltaflow.define.scoped import Scoped
from deltaflow.errors import GraphError

if TYPE_CHECKING:
    from deltaflow.resolve.resolver import Resolver

_RESOLVER = Scoped["Resolver"]("resolver", lambda: GraphError(
    "pipeline datasets can only be read inside a dataset function run by deltaflow",
    hint="call dp.read_stream / spark.readStream.table inside a @dp.table function"))

#: Make a resolver the one reads inside a block report to: ``with resolving(resolver): ...``.
resolving = _RESOLVER.bind


def active_resolver() -> Resolver:
    """The resolver of the flow being built.

    Raises:
        GraphError: Outside a dataset function run by deltaflow.

    """
    return _RESOLVER.get()


def note_source(label: str) -> None:
    """Record that the flow being built reads an outside source (shown by ``deltaflow graph``)."""
    resolver = _RESOLVER.peek()
    if resolver is not None:
        resolver.note_source(label)


def analysing() -> bool:
    """Whether the flow being built is only analysed (``deltaflow dry-run`` / ``graph``): nothing runs."""
    resolver = _RESOLVER.peek()
    return resolver is not None and resolver.analyze_only


def warn(message: str) -> None:
    """Tell the analysis about a problem that would stop a run (e.g. an unreachable Kafka broker)."""
    resolver = _RESOLVER.peek()
    if resolver is not None:
        resolver.warn(message)


def building() -> bool:
    """True inside a dataset function run by deltaflow (a resolver is at work)."""
    return _RESOLVER.peek() is not None
