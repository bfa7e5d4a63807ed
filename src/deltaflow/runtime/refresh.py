"""Full refresh: rebuild a dataset from scratch while readers keep seeing its old rows until the new ones.

A streaming table's flows move to a new checkpoint generation and first run (available-now) into a
staging table; then the table's rows are replaced by the staging table's in one overwrite commit, and the
flows go on from there into the table itself. Readers see the old rows, then all the new ones: never an
empty or half-filled table. A materialized view is recomputed and replaced in one commit.

The refresh is recorded (the generations it moves to, see
:meth:`~deltaflow.storage.layout.StorageLayout.refresh_record`) before anything changes, and that record
is removed only once the table has been replaced; a run that finds it (after a crash) finishes the refresh.

Examples:
    >>> FullRefresh(layout, "silver_clicks").request({"silver_clicks": 1})  # doctest: +SKIP

"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deltaflow.sinks.writer import FlowWriters
    from deltaflow.storage import StorageLayout


@dataclass(frozen=True)
class FullRefresh:
    """The full-refresh record of one dataset."""

    layout: StorageLayout
    dataset: str

    @property
    def staging(self) -> str:
        """The staging table's location."""
        return self.layout.staging_table(self.dataset)

    def pending(self) -> dict[str, int] | None:
        """The generation of each flow of an unfinished refresh, or None."""
        text = self.layout.fs.read_text(self.layout.refresh_record(self.dataset))
        return None if text is None else {str(k): int(v) for k, v in json.loads(text).items()}

    def staging_lost(self, kind: str) -> bool:
        """Whether a pending refresh of a streaming table lost its staging table after its flows wrote to it.

        Its flows' checkpoints would go on from where they were, filling a new staging table with only what
        comes after, so the refresh must start again, from new checkpoint generations.
        """
        pending = self.pending()
        if kind != "table" or pending is None or self.layout.fs.exists(f"{self.staging}/_delta_log"):
            return False
        return any(self.layout.fs.list(self.layout.checkpoint(self.dataset, flow, generation).commits)
                   for flow, generation in pending.items())

    def request(self, generations: dict[str, int]) -> None:
        """Record the refresh (atomically), then create the flows' new, empty checkpoint generations."""
        self.layout.fs.write_text(self.layout.refresh_record(self.dataset), json.dumps(generations))
        for flow, generation in generations.items():
            self.layout.start_generation(self.dataset, flow, generation)

    def finish(self) -> None:
        """Forget the refresh and its staging table (the table has been replaced)."""
        self.layout.fs.delete(self.layout.refresh_record(self.dataset))
        self.layout.fs.delete_tree(self.layout.staging(self.dataset))


def refresh_dataset(writers: FlowWriters, dataset: str, on_message: Callable[[str], None]) -> None:
    """Carry out the recorded full refresh of ``dataset``: a view recomputed, a table rebuilt and swapped.

    Raises:
        FlowError: The rebuild failed (the record stays, so the next run tries again).

    """
    from deltaflow.errors import FlowError, first_line

    refresh = FullRefresh(writers.layout, dataset)
    kind = writers.resolver.kinds[dataset]
    how = {"table": "rebuild in staging", "materialized_view": "recompute"}.get(kind, "from scratch")
    on_message(f"{dataset}: full refresh ({how})")
    try:
        if kind == "materialized_view":
            writers.view(dataset).refresh_all()
        elif kind == "table":
            _refill(writers, dataset, refresh, on_message)
    except FlowError:
        raise
    except Exception as exc:
        raise FlowError(f"full refresh of '{dataset}' failed: {first_line(exc)}",
                        location=str(writers.resolver.graph.datasets[dataset].location)) from exc
    refresh.finish()


def _refill(writers: FlowWriters, dataset: str, refresh: FullRefresh,
            on_message: Callable[[str], None]) -> None:
    from deltaflow.errors import FlowError, first_line
    from deltaflow.faults import crash_point
    from deltaflow.properties import table_settings
    from deltaflow.runtime.triggers import Trigger
    from deltaflow.sinks.tables import ensure_table, replace_rows, set_declared

    resolver = writers.resolver
    spec = resolver.graph.datasets[dataset]
    properties = resolver.table_properties(dataset)
    if writers.layout.fs.exists(f"{refresh.staging}/_delta_log"):  # an interrupted refresh's: as declared now
        set_declared(writers.spark, spec, refresh.staging, properties,
                     table_settings(writers.layout.open_table(refresh.staging)))
    else:
        ensure_table(writers.spark, spec, refresh.staging, resolver.schemas[dataset], properties)
    for flow in resolver.graph.flows_into(dataset):
        query = writers.start(flow, Trigger("available_now"), into=refresh.staging)
        assert query is not None  # a streaming table's flow always runs
        query.awaitTermination()
        error = query.exception()
        if error is not None:
            raise FlowError(f"full refresh of '{dataset}': flow '{flow.name}' failed: "
                            f"{first_line(error)}", location=str(flow.location))
    rows = replace_rows(writers.spark, spec, refresh.staging, writers.layout.table(dataset))
    crash_point(f"refresh_swapped:{dataset}")
    on_message(f"{dataset}: replaced with {rows:,} rebuilt rows")
