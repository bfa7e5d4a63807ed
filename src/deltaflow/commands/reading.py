"""The read verbs of :class:`~deltaflow.pipeline.Pipeline`, each answered from storage without a JVM.

Examples:
    >>> pipeline = Pipeline.load("examples/orders", reading=True)  # doctest: +SKIP
    >>> pipeline.sql("SELECT count(*) AS n FROM silver_orders").rows  # doctest: +SKIP
    [(4,)]

"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deltaflow.commands.history import TableVersion
    from deltaflow.commands.quarantine import QuarantineReport
    from deltaflow.commands.query import QueryResult
    from deltaflow.commands.status import FlowStatus
    from deltaflow.define.graph import PipelineGraph
    from deltaflow.spec import Spec
    from deltaflow.storage import StorageLayout


class ReadVerbs:
    """status, show, sql, changes, history and quarantine, over a pipeline's ``spec`` and ``storage()``."""

    spec: Spec

    def storage(self) -> StorageLayout:  # noqa: D102 (the pipeline's)
        raise NotImplementedError

    @property
    def graph(self) -> PipelineGraph:  # noqa: D102 (the pipeline's)
        raise NotImplementedError

    def status(self) -> list[FlowStatus]:
        """Each flow's state, last batch, rates and backlog, from the event log; flows not run yet too."""
        from deltaflow.commands.status import pipeline_status

        layout = self.storage().read_once()
        return pipeline_status(self.spec, layout, declared=self._declared_flows(layout))

    def _declared_flows(self, layout: StorageLayout) -> tuple[str, ...]:
        """The flows to list even without an event: the last run's, else the definitions' (if they load).

        The last run's come from its graph record: ``status`` loads no pyspark then.
        """
        from deltaflow.errors import DeltaflowError
        from deltaflow.observe.graph_record import flow_locations, read_graph_record

        if (record := read_graph_record(layout)) is not None:
            return tuple(flow_locations(record))
        try:
            return tuple(self.graph.flows)
        except DeltaflowError:
            return ()

    def changes(self, table: str, start: int = 0, end: int | None = None,
                on_message: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
        """``table``'s Change Data Feed rows, versions ``start`` (or the feed's first) to ``end`` (latest)."""
        from deltaflow.commands.changes import table_changes

        return table_changes(self.storage(), table, start, end, on_message, self.spec.path)

    def history(self, table: str, limit: int = 20) -> list[TableVersion]:
        """``table``'s newest ``limit`` versions (0: all), each with the flow and batch that wrote it."""
        from deltaflow.commands.history import table_history

        return table_history(self.storage(), table, limit)

    def quarantine(self, table: str, samples: int = 3) -> QuarantineReport:
        """``table``'s quarantined rows counted by reason, with samples."""
        from deltaflow.commands.quarantine import QuarantineReport, quarantine_report, quarantines
        from deltaflow.errors import ConfigError

        layout = self.storage()
        try:
            return quarantine_report(layout, table, samples)
        except ConfigError:
            if not quarantines(self.graph, layout, table):
                raise
            return QuarantineReport(table, 0, {}, {})  # declared, and nothing quarantined yet

    def show(self, table: str, limit: int = 20, where: str | None = None,
             version: int | None = None) -> QueryResult:
        """``table``'s first ``limit`` rows (0: all) at ``version`` (latest) matching ``where`` (SQL)."""
        from deltaflow.commands.query import table_rows

        return table_rows(self.storage(), table, limit, where, version)

    def sql(self, query: str) -> QueryResult:
        """The answer to a SQL ``query`` over the pipeline's tables by name (DataFusion's dialect)."""
        from deltaflow.commands.query import run_sql

        return run_sql(self.storage(), query)
