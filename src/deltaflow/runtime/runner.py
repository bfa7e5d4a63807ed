"""Run a pipeline: start one streaming query per flow in one SparkSession, watch them, stop them cleanly.

Each flow writes through its own checkpoint (see :mod:`deltaflow.runtime.checkpoints`), so each restarts
on its own; a flow that fails stops alone while the others go on, and the run reports it at the end.
A stop request (Ctrl-C, SIGTERM) lets each flow finish the batch it is writing, then stops it.

Example:
    >>> run = PipelineRun(spec, graph, spark, Trigger("available_now"))  # doctest: +SKIP
    >>> outcomes = run.run(threading.Event())

"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from deltaflow.context import PipelineContext, activate
from deltaflow.errors import DeltaflowError, FlowError, GraphError
from deltaflow.runtime.checkpoints import checkpoint_path, current_generation
from deltaflow.runtime.triggers import Trigger
from deltaflow.sinks.append import ensure_table, start_append

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from deltaflow.graph import Flow, PipelineGraph
    from deltaflow.spec import Spec

POLL_SECONDS = 0.2


@dataclass(frozen=True)
class BatchProgress:
    """One committed micro-batch of one flow."""

    flow: str
    batch_id: int
    input_rows: int
    input_rows_per_second: float
    processed_rows_per_second: float
    duration_ms: int


@dataclass(frozen=True)
class FlowOutcome:
    """How a flow ended."""

    flow: str
    location: str
    state: Literal["completed", "stopped", "failed"]
    error: str | None = None


ProgressCallback = Callable[[BatchProgress], None]


class PipelineRun:
    """The running queries of one pipeline.

    Args:
        spec: The validated spec.
        graph: The loaded definitions.
        spark: The session to run in.
        trigger: When flows run.
        on_batch: Called (on the caller's thread) for every micro-batch that read rows.

    """

    def __init__(self, spec: Spec, graph: PipelineGraph, spark: SparkSession, trigger: Trigger,
                 on_batch: ProgressCallback | None = None) -> None:
        self.spec = spec
        self.graph = graph
        self.spark = spark
        self.trigger = trigger
        self.on_batch = on_batch
        self.context = PipelineContext(spark=spark, spec=spec)
        self.queries: dict[str, StreamingQuery] = {}
        self._reported: dict[str, int] = {}

    def start(self) -> None:
        """Build every flow's DataFrame and start its query (tables are created first)."""
        with activate(self.context):
            for flow in self.graph.flows.values():
                self.queries[flow.name] = self._start_flow(flow)

    def _start_flow(self, flow: Flow) -> StreamingQuery:
        dataset = self.graph.datasets[flow.target]
        try:
            df = flow.func()
        except DeltaflowError:
            raise
        except Exception as exc:
            raise GraphError(f"flow '{flow.name}' failed to build: {_first_line(exc)}",
                             location=str(flow.location)) from exc
        if not getattr(df, "isStreaming", False):
            raise GraphError(f"@dp.table '{dataset.name}' must return a streaming DataFrame",
                             location=str(flow.location), hint="read with dp.read_kafka / dp.read_files")
        storage = self.spec.storage_path
        path = self.context.table_path(dataset.name)
        ensure_table(self.spark, dataset, path, df)
        generation = current_generation(storage, dataset.name, flow.name)
        return start_append(
            df, name=flow.name, path=path, trigger=self.trigger, partition_cols=dataset.partition_cols,
            checkpoint=checkpoint_path(storage, dataset.name, flow.name, generation),
        )

    def poll_progress(self) -> None:
        """Report micro-batches committed since the last call."""
        for name, query in self.queries.items():
            for progress in query.recentProgress:
                if progress.batchId <= self._reported.get(name, -1) or progress.numInputRows == 0:
                    continue
                self._reported[name] = progress.batchId
                if self.on_batch:
                    self.on_batch(BatchProgress(
                        flow=name, batch_id=progress.batchId, input_rows=progress.numInputRows,
                        input_rows_per_second=float(progress.inputRowsPerSecond or 0.0),
                        processed_rows_per_second=float(progress.processedRowsPerSecond or 0.0),
                        duration_ms=int(progress.durationMs.get("triggerExecution", 0)),
                    ))

    def wait(self, stop: threading.Event, grace_seconds: float = 120.0) -> list[FlowOutcome]:
        """Watch the queries until all have ended or ``stop`` is set, then stop them between batches."""
        while any(q.isActive for q in self.queries.values()):
            self.poll_progress()
            if stop.wait(POLL_SECONDS):
                self.stop(grace_seconds)
                break
        self.poll_progress()
        return self.outcomes(stopped=stop.is_set())

    def stop(self, grace_seconds: float = 120.0) -> None:
        """Stop every query once the batch it was writing when asked (if any) has committed.

        Under steady input the next trigger starts the moment a batch commits, so "between batches" is an
        instant no poll can hit; instead each query is stopped as soon as a new batch has committed. A batch
        started in that instant is cancelled before its commit and replayed by the next run (its offsets
        are in the checkpoint), so nothing is lost or written twice.
        """
        deadline = time.monotonic() + grace_seconds
        busy = {name: _last_batch(q) for name, q in self.queries.items()
                if q.isActive and q.status.get("isTriggerActive")}
        while busy and time.monotonic() < deadline:
            for name, last in list(busy.items()):
                query = self.queries[name]
                idle = not query.isActive or not query.status.get("isTriggerActive")
                if idle or _last_batch(query) != last:
                    query.stop()
                    del busy[name]
            time.sleep(0.02)
        for query in self.queries.values():
            query.stop()

    def outcomes(self, stopped: bool) -> list[FlowOutcome]:
        """The state each flow ended in."""
        result = []
        for name, query in self.queries.items():
            location = str(self.graph.flows[name].location)
            error = query.exception()
            if error is not None:
                result.append(FlowOutcome(name, location, "failed", _first_line(error)))
            else:
                result.append(FlowOutcome(name, location, "stopped" if stopped else "completed"))
        return result

    def run(self, stop: threading.Event) -> list[FlowOutcome]:
        """Start, wait, and raise :class:`FlowError` naming every failed flow."""
        self.start()
        outcomes = self.wait(stop)
        failed = [o for o in outcomes if o.state == "failed"]
        if failed:
            names = "; ".join(f"'{o.flow}' ({o.location}): {o.error}" for o in failed)
            raise FlowError(f"{len(failed)} flow(s) failed: {names}")
        return outcomes


def _last_batch(query: StreamingQuery) -> tuple[int, str] | None:
    progress = query.lastProgress
    return (progress.batchId, progress.timestamp) if progress is not None else None


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "desc", None) or exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
