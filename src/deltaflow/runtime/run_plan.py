"""What a run updates and what it rebuilds from scratch (``--refresh``, ``--full-refresh``).

Examples:
    >>> RunPlan(full_refresh=frozenset({"silver"})).full_refresh_all
    False

"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from deltaflow.define.graph import suggest
from deltaflow.errors import ArgumentError

if TYPE_CHECKING:
    from deltaflow.define.graph import PipelineGraph


@dataclass(frozen=True)
class RunPlan:
    """Which datasets a run updates, and which it rebuilds from scratch.

    Args:
        refresh: Only these datasets and the datasets they read (None: every dataset).
        full_refresh: These datasets and every dataset downstream of them start from scratch.
        full_refresh_all: Every dataset starts from scratch.

    """

    refresh: frozenset[str] | None = None
    full_refresh: frozenset[str] = frozenset()
    full_refresh_all: bool = False

    def check(self, graph: PipelineGraph) -> None:
        """Every named dataset exists and is stored.

        Raises:
            ArgumentError: Naming the option and the unknown dataset (before Spark starts).

        """
        for option, names in (("--refresh", self.refresh or ()), ("--full-refresh", self.full_refresh)):
            for name in names:
                dataset = graph.datasets.get(name)
                if dataset is None:
                    raise ArgumentError(f"unknown dataset '{name}'{suggest(name, graph.datasets)}",
                                        location=option, hint="see 'deltaflow graph'")
                if not dataset.runs:
                    raise ArgumentError(f"'{name}' is a temporary view; there is nothing to refresh",
                                        location=option)
