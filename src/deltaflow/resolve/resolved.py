"""What resolution learns about a pipeline, and the questions the runner and the sinks ask of it.

Examples:
    >>> resolved.flows["silver_clicks"].inputs  # doctest: +SKIP
    {'bronze_clicks': 'stream'}
    >>> resolved.order()  # doctest: +SKIP
    ['bronze_clicks', 'silver_clicks', 'gold_hourly_product_metrics']

"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deltaflow.errors import GraphError
from deltaflow.resolve.reads import CHANGE_COLUMNS, CHANGE_FEED, ReadMode

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from deltaflow.define.graph import DatasetKind, Flow, PipelineGraph


@dataclass
class ResolvedFlow:
    """A flow with its DataFrame and what it reads.

    Attributes:
        flow: The registered flow.
        df: Its query (expectations applied).
        inputs: The pipeline datasets it reads (temporary views included), and how.
        sources: The outside sources it reads (``kafka:clicks``, ``files:landing/orders``).
        changes: The datasets whose change feed it reads.
        pinned: The datasets it reads as of a version or a timestamp (time travel).
        quarantines: Whether some of its rows go to its table's quarantine (expectations, ``parse_json``).
        options: Per pipeline dataset it reads, the read's options.

    """

    flow: Flow
    df: DataFrame = field(default=None)  # type: ignore[assignment]  # set once the function has run
    inputs: dict[str, ReadMode] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    changes: set[str] = field(default_factory=set)
    pinned: set[str] = field(default_factory=set)
    quarantines: bool = False
    options: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def streaming(self) -> bool:
        """Whether the flow's query is a streaming one."""
        return bool(self.df.isStreaming)


class ResolvedGraph:
    """A pipeline graph with every flow resolved: kinds, schemas, inputs, and questions about them.

    Args:
        graph: The registered definitions.
        default_properties: The spec's ``table_properties`` (each dataset's own win).

    """

    def __init__(self, graph: PipelineGraph, default_properties: Mapping[str, str]) -> None:
        self.graph = graph
        self.default_properties = dict(default_properties)
        self.flows: dict[str, ResolvedFlow] = {}
        self.kinds: dict[str, DatasetKind] = {}
        self.schemas: dict[str, StructType] = {}

    def table_properties(self, dataset: str) -> dict[str, str]:
        """The Delta table properties of ``dataset``: the spec's defaults, then the dataset's own.

        A table holding change-feed rows (``_change_type`` ...) cannot record a change feed of its own, so
        the spec's default does not apply to it, and the table's own setting is an error.

        Raises:
            GraphError: The dataset asks for a change feed but has the change feed's columns.

        """
        own = self.graph.datasets[dataset].table_properties
        properties = {**self.default_properties, **own}
        schema = self.schemas.get(dataset)
        reserved = [c for c in CHANGE_COLUMNS if schema is not None and c in schema.names]
        if reserved and properties.get(CHANGE_FEED, "false").lower() == "true":
            if CHANGE_FEED in own:
                raise GraphError(f"'{dataset}' holds the change-feed columns {', '.join(reserved)}, so it "
                                 "cannot record a change feed of its own",
                                 location=str(self.graph.datasets[dataset].location),
                                 hint=f"rename those columns, or drop {CHANGE_FEED} from its properties")
            del properties[CHANGE_FEED]
        return properties

    def records_changes(self, dataset: str) -> bool:
        """Whether ``dataset``'s table records a Change Data Feed."""
        return self.table_properties(dataset).get(CHANGE_FEED, "false").lower() == "true"

    def rewrites(self, dataset: str) -> bool:
        """Whether ``dataset``'s table gets commits that change or remove rows (views, auto CDC targets)."""
        return (self.kinds.get(dataset) == "materialized_view"
                or any(f.cdc is not None for f in self.graph.flows_into(dataset)))

    def inputs(self, dataset: str) -> dict[str, ReadMode]:
        """The datasets ``dataset``'s flows read directly (temporary views included)."""
        result: dict[str, ReadMode] = {}
        for flow in self.graph.flows_into(dataset):
            result.update(self.flows[flow.name].inputs)
        return result

    def stored_inputs(self, dataset: str) -> dict[str, ReadMode]:
        """Like :meth:`inputs`, with temporary views replaced by the tables they read."""
        result: dict[str, ReadMode] = {}
        for name, mode in self.inputs(dataset).items():
            if self.kinds[name] == "temporary_view":
                result.update(self.stored_inputs(name))
            else:
                result[name] = mode
        return result

    def flow_stored_inputs(self, flow: str) -> dict[str, ReadMode]:
        """The stored datasets flow ``flow`` reads, through temporary views."""
        stored: dict[str, ReadMode] = {}
        for name, mode in self.flows[flow].inputs.items():
            stored.update(self.stored_inputs(name) if self.kinds[name] == "temporary_view" else {name: mode})
        return stored

    def upstream(self, names: set[str]) -> set[str]:
        """``names`` and every dataset they read, transitively."""
        return _closure(names, self.inputs)

    def downstream(self, names: set[str]) -> set[str]:
        """``names`` and every dataset reading them, transitively."""
        return _closure(names, lambda name: [d for d in self.graph.datasets if name in self.inputs(d)])

    def order(self) -> list[str]:
        """Every dataset, each after all the datasets it reads."""
        done: list[str] = []

        def visit(name: str) -> None:
            if name not in done:
                for upstream in self.inputs(name):
                    visit(upstream)
                done.append(name)

        for name in self.graph.datasets:
            visit(name)
        return done


def _closure(names: set[str], neighbours: Callable[[str], Iterable[str]]) -> set[str]:
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(neighbours(name))
    return seen
