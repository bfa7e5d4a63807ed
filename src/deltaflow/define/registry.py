"""The pipeline graph that definitions register into while deltaflow loads a definition file.

:func:`registering` makes a :class:`~deltaflow.define.graph.PipelineGraph` the active one for a
block; the decorators and functions of :mod:`deltaflow.define.datasets` and :mod:`deltaflow.define.cdc` add
their datasets and flows to it through :func:`active_graph`, each with the
:class:`~deltaflow.define.graph.SourceLocation` it was declared at. Nothing here touches Spark.

Examples:
    >>> from deltaflow.define.graph import PipelineGraph
    >>> with registering(PipelineGraph()) as graph:  # doctest: +SKIP
    ...     runpy.run_path("pipelines/clicks.py")

"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from deltaflow.define.graph import PipelineGraph, SourceLocation
from deltaflow.define.scoped import Scoped
from deltaflow.errors import GraphError

_REGISTRY = Scoped[PipelineGraph]("registry", lambda: GraphError("no definition file is being loaded"))


@contextmanager
def registering(graph: PipelineGraph) -> Iterator[PipelineGraph]:
    """Collect the definitions made inside the block into ``graph``."""
    with _REGISTRY.bind(graph):
        yield graph


def active_graph(what: str) -> PipelineGraph:
    """The graph of the enclosing :func:`registering` block.

    Args:
        what: The decorator or function asking (``"@dp.table"``), named in the error.

    Raises:
        GraphError: No definition file is being loaded.

    Examples:
        >>> active_graph("@dp.table")  # doctest: +SKIP
        Traceback (most recent call last):
        deltaflow.errors.GraphError: @dp.table can only be used in a definition file loaded by deltaflow

    """
    graph = _REGISTRY.peek()
    if graph is None:
        raise GraphError(
            f"{what} can only be used in a definition file loaded by deltaflow",
            hint="list the file under 'libraries' in deltaflow.yml and run 'deltaflow run'",
        )
    return graph


def relative_location(file: str, line: int) -> SourceLocation:
    """``file:line``, the file relative to the working folder when it lies inside it.

    Examples:
        >>> str(relative_location("/elsewhere/defs.py", 3))
        '/elsewhere/defs.py:3'

    """
    with suppress(ValueError):
        file = str(Path(file).resolve().relative_to(Path.cwd()))
    return SourceLocation(file, line)


def source_location(func: Callable[..., Any]) -> SourceLocation:
    """Where ``func`` is defined, its file relative to the working folder when it lies inside it.

    Examples:
        >>> source_location(source_location).line > 0
        True

    """
    try:
        file = inspect.getsourcefile(func) or "<unknown>"
        line = inspect.getsourcelines(func)[1]
    except (OSError, TypeError):
        code = getattr(func, "__code__", None)
        file, line = (code.co_filename, code.co_firstlineno) if code else ("<unknown>", 0)
    return relative_location(file, line)


def caller_location() -> SourceLocation:
    """Where the function calling this one was called from (a definition file's line).

    Examples:
        >>> def create_streaming_table(name):  # doctest: +SKIP
        ...     where = caller_location()  # the line of the create_streaming_table(...) call

    """
    # the frame itself, not inspect.stack(): that reads the source of every frame on the stack
    frame = sys._getframe(2)
    return relative_location(frame.f_code.co_filename, frame.f_lineno)
