"""The event log: one row per micro-batch of every flow, in a Delta table under the pipeline's storage.

A listener (a Spark ``StreamingQueryListener``, :mod:`deltaflow.runtime.listener`) turns each query
progress into a :class:`BatchEvent`; a writer thread appends them with ``deltalake`` (no Spark job, so
logging never competes with the flows), every second or so. The table is ``StorageLayout.event_log``
(``<storage>/_event_log``): Spark, ``deltalake`` and ``deltaflow status`` read it.

An append that fails (past ``deltalake``'s own retries) is tried again with the next one, events kept;
each append carries the run's id and its number as a Delta transaction, so an append whose answer was
lost is found in the log and not written twice. A log that stays unwritable for
:data:`PATIENCE_SECONDS` stops the run (:attr:`EventLog.failing`).

Examples:
    >>> log = EventLog(layout.event_log, pipeline="clickstream")  # doctest: +SKIP
    >>> log.add(end_event("clickstream", log.run_id, "bronze", "completed", None))  # doctest: +SKIP
    >>> log.close()  # doctest: +SKIP

"""

from __future__ import annotations

import json
import queue
import re
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from deltaflow.errors import first_line

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

FLUSH_SECONDS = 1.0
#: How long the log may fail every append before the run stops (the tables are not affected).
PATIENCE_SECONDS = 120.0
#: Where a view's refresh is added to its driver query's progress (see :mod:`deltaflow.runtime.listener`).
REFRESH_KEY = "deltaflowRefresh"
#: Appends between two compactions of the log's files (a reader then opens a few files, not thousands).
COMPACT_EVERY = 100
#: How long the event log's own Delta commit files are kept once checkpointed (its rows are kept for good).
LOG_RETENTION = "interval 1 hour"
_LOG_RETENTION_KEY = "delta.logRetentionDuration"


@dataclass(frozen=True)
class BatchEvent:
    """One row of the event log: a micro-batch of a flow, or the end of a flow's query."""

    pipeline: str
    run_id: str
    flow: str
    query_id: str
    kind: str  # "batch", or how the flow ended: "completed", "stopped", "failed", "skipped"
    batch_id: int | None
    start_time: datetime
    end_time: datetime
    input_rows: int
    input_rows_per_second: float
    processed_rows_per_second: float
    duration_ms: int
    durations_ms: str  # JSON: Spark's durationMs breakdown (addBatch, getBatch, queryPlanning ...)
    sources: str  # JSON: per source, its description, start/end/latest offsets and metrics
    delta_versions_behind: int | None  # Delta sources: versions committed but not read yet, summed
    kafka_offsets_behind: int | None  # Kafka sources: maxOffsetsBehindLatest, summed over sources
    expectations: str | None  # JSON: per expectation, rows passed and failed (data quality)
    error: str | None
    trigger: str | None = None  # the run's trigger ("available-now", "continuous, every 10 seconds"...)
    refresh: str | None = None  # JSON: a materialized view's refresh in this batch: mode, rows written


def _schema() -> pa.Schema:
    import pyarrow as pa

    types = {"batch_id": pa.int64(), "input_rows": pa.int64(), "duration_ms": pa.int64(),
             "input_rows_per_second": pa.float64(), "processed_rows_per_second": pa.float64(),
             "delta_versions_behind": pa.int64(), "kafka_offsets_behind": pa.int64(),
             "start_time": pa.timestamp("us", tz="UTC"), "end_time": pa.timestamp("us", tz="UTC")}
    return pa.schema([pa.field(f.name, types.get(f.name, pa.string())) for f in fields(BatchEvent)])


def delta_versions_behind(sources: Iterable[Mapping[str, Any]],
                          storage_options: Mapping[str, str] | None = None,
                          opened: dict[str, DeltaTable] | None = None) -> int | None:
    """How many committed versions of its Delta sources a batch left unread (None: no Delta source).

    Open-source Delta reports no backlog metrics, so the source tables' logs are read (with deltalake).
    An end offset ``{reservoirVersion: v, ...}`` means the versions before ``v`` were read; ``v`` itself
    counts as unread, since it may have been read in part. ``opened``: the tables opened by earlier calls,
    brought up to date by reading only their new commits (opening one reads its log from its checkpoint).

    Examples:
        >>> delta_versions_behind([{"description": "KafkaV2[Subscribe[clicks]]"}]) is None
        True

    """
    from deltalake import DeltaTable

    behind = None
    for source in sources:
        description, end = str(source.get("description") or ""), source.get("end_offset")
        match = re.fullmatch(r"DeltaSource\[(?:file:)?(.+)\]", description)
        if match is None or not isinstance(end, dict):
            continue
        path = match.group(1)
        try:
            if opened is not None and path in opened:
                opened[path].update_incremental()
                table = opened[path]
            else:
                table = DeltaTable(path, storage_options=dict(storage_options or {}) or None)
                if opened is not None:
                    opened[path] = table
            latest = table.version()
        except Exception:  # the source table may be gone; the log must not fail for it
            if opened is not None:
                opened.pop(path, None)
            continue
        behind = (behind or 0) + max(0, latest - int(end["reservoirVersion"]) + 1)
    return behind


def _metric_sum(sources: Iterable[Mapping[str, Any]], name: str) -> int | None:
    values = [int(float(s["metrics"][name])) for s in sources if name in (s.get("metrics") or {})]
    return sum(values) if values else None


def batch_event(pipeline: str, run_id: str, progress: Mapping[str, Any]) -> BatchEvent:
    """The event of one query progress, given as Spark's progress JSON (``StreamingQueryProgress.json``).

    Examples:
        >>> event = batch_event("p", "r", {"name": "bronze", "id": "q", "batchId": 3,
        ...     "timestamp": "2026-11-21T10:00:00.000Z", "numInputRows": 10, "durationMs":
        ...     {"triggerExecution": 500}, "sources": [{"description": "KafkaV2[Subscribe[clicks]]",
        ...     "metrics": {"maxOffsetsBehindLatest": "42"}}]})
        >>> (event.flow, event.batch_id, event.input_rows, event.kafka_offsets_behind)
        ('bronze', 3, 10, 42)

    """
    start = datetime.fromisoformat(str(progress["timestamp"]).replace("Z", "+00:00"))
    durations = {k: int(v) for k, v in (progress.get("durationMs") or {}).items()}
    total = durations.get("triggerExecution", 0)
    sources = [{"description": s.get("description"), "start_offset": s.get("startOffset"),
                "end_offset": s.get("endOffset"), "latest_offset": s.get("latestOffset"),
                "num_input_rows": s.get("numInputRows"), "metrics": s.get("metrics") or {}}
               for s in progress.get("sources") or []]
    return BatchEvent(
        pipeline=pipeline, run_id=run_id, flow=str(progress.get("name") or progress["id"]),
        query_id=str(progress["id"]), kind="batch", batch_id=int(progress["batchId"]), start_time=start,
        end_time=datetime.fromtimestamp(start.timestamp() + total / 1000, UTC),
        input_rows=int(progress.get("numInputRows") or 0),
        input_rows_per_second=float(progress.get("inputRowsPerSecond") or 0.0),
        processed_rows_per_second=float(progress.get("processedRowsPerSecond") or 0.0),
        duration_ms=total, durations_ms=json.dumps(durations), sources=json.dumps(sources, default=str),
        delta_versions_behind=None,  # filled in by the writer thread (it reads the source tables' logs)
        kafka_offsets_behind=_metric_sum(sources, "maxOffsetsBehindLatest"),
        expectations=json.dumps(metrics) if (metrics := (progress.get("observedMetrics") or {}).get(
            "deltaflow_expectations")) else None, error=None,
        refresh=json.dumps(refresh) if (refresh := progress.get(REFRESH_KEY)) else None,
    )


def with_input_rows(event: BatchEvent, rows: int) -> BatchEvent:
    """``event`` with ``rows`` read (its rates scaled alike): a carrier's batch as each of its flows read it.

    Examples:
        >>> with_input_rows(batch_event("p", "r", {"name": "bronze", "id": "q", "batchId": 0,
        ...     "numInputRows": 8, "timestamp": "2026-11-26T10:00:00.000Z"}), 4).input_rows
        4

    """
    ratio = rows / event.input_rows if event.input_rows else 0.0
    return replace(event, input_rows=rows, input_rows_per_second=event.input_rows_per_second * ratio,
                   processed_rows_per_second=event.processed_rows_per_second * ratio)


def _flow_event(pipeline: str, run_id: str, flow: str, kind: str, start: datetime, end: datetime,
                error: str | None = None, refresh: str | None = None) -> BatchEvent:
    """An event of a flow outside Spark's progress reports: no query, no rows read."""
    return BatchEvent(
        pipeline=pipeline, run_id=run_id, flow=flow, query_id="", kind=kind, batch_id=None, start_time=start,
        end_time=end, input_rows=0, input_rows_per_second=0.0, processed_rows_per_second=0.0,
        duration_ms=int((end - start).total_seconds() * 1000), durations_ms="{}", sources="[]",
        delta_versions_behind=None, kafka_offsets_behind=None, expectations=None, error=error,
        refresh=refresh,
    )


def refresh_event(pipeline: str, run_id: str, flow: str, refresh: Mapping[str, Any]) -> BatchEvent:
    """The event of a view's refresh outside any query (a view without pipeline inputs, at each run's start).

    ``refresh``: its mode, rows written, and when it ``began`` and ``ended`` (datetimes).
    """
    return _flow_event(pipeline, run_id, flow, "batch", refresh["began"], refresh["ended"],
                       refresh=json.dumps({k: refresh[k] for k in ("mode", "rows_written")}))


def end_event(pipeline: str, run_id: str, flow: str, state: str, error: str | None) -> BatchEvent:
    """The event of a flow's end in a run: ``completed``, ``stopped`` or ``failed`` (with its error)."""
    now = datetime.now(UTC)
    return _flow_event(pipeline, run_id, flow, state, now, now, error=error)


class EventLog:
    """Appends events to the event log's Delta table from a background thread.

    Args:
        path: The event log's table (``StorageLayout.event_log``).
        pipeline: The pipeline's name (a column, so several pipelines may share a log reader).
        run_id: This run's id (default: a new one).
        trigger: The run's trigger, in words (a column of every row).
        storage_options: ``deltalake``'s options for ``path`` (S3 keys).

    """

    def __init__(self, path: str, pipeline: str, run_id: str | None = None, trigger: str | None = None,
                 storage_options: Mapping[str, str] | None = None) -> None:
        self.path = path
        self.trigger = trigger
        self._appends = 0
        self.storage_options = dict(storage_options or {}) or None
        self.pipeline = pipeline
        self.run_id = run_id or uuid.uuid4().hex
        self._queue: queue.Queue[BatchEvent | None] = queue.Queue()
        self._thread = threading.Thread(target=self._write_loop, name="deltaflow-event-log", daemon=True)
        self._thread.start()
        self.error: BaseException | None = None
        self._seen: dict[str, int] = {}  # query id -> newest batch id logged
        self._opened: dict[str, DeltaTable] = {}  # the writer thread's tables: the log, the sources read
        self._seen_changed = threading.Condition()
        #: Carrier flow -> the flows its query also writes (:mod:`deltaflow.sinks.carry`): each batch of the
        #: carrier's query is logged for each of them too.
        self.carried: dict[str, tuple[str, ...]] = {}
        self._retry: list[BatchEvent] = []  # the failed append, tried again as it was (it may have landed)
        self._later: list[BatchEvent] = []  # events that came meanwhile, appended once it is through
        self._failing_since: float | None = None  # monotonic time of the first of the failing appends

    def add(self, event: BatchEvent) -> None:
        """Queue ``event`` for the next append."""
        self._queue.put(event)
        if event.batch_id is not None:
            with self._seen_changed:
                self._seen[event.query_id] = max(event.batch_id, self._seen.get(event.query_id, -1))
                self._seen_changed.notify_all()

    def await_batches(self, last: Mapping[str, int], timeout: float = 10.0) -> bool:
        """Wait until batch ``last[query id]`` of every query is logged; False on timeout.

        Spark's listener bus delivers progress asynchronously, so the last batches of a run may reach the
        listener after their queries stopped.
        """
        with self._seen_changed:
            return self._seen_changed.wait_for(
                lambda: all(self._seen.get(q, -1) >= b for q, b in last.items()), timeout)

    def close(self) -> str | None:
        """Write what is queued and stop the writer thread; a warning if some events could not be written."""
        self._queue.put(None)
        self._thread.join(timeout=60)
        if not self.unwritten:
            return None
        return (f"warning: the event log ({self.path}) missed {len(self.unwritten)} event(s): {self._why()}; "
                "the tables are not affected; "
                "status and ui miss them (a damaged log: move its folder away, the next run starts one)")

    @property
    def unwritten(self) -> list[BatchEvent]:
        """The events not in the log yet because appends failed."""
        return self._retry + self._later

    @property
    def failing(self) -> str | None:
        """Why the run must stop: every append failed for :data:`PATIENCE_SECONDS` (None: the log is fine)."""
        since = self._failing_since
        if since is None or time.monotonic() - since < PATIENCE_SECONDS:
            return None
        return (f"the event log ({self.path}) could not be written for {time.monotonic() - since:.0f} s: "
                f"{self._why()}; the tables are not affected")

    def _why(self) -> str:
        return first_line(self.error) if self.error else "no answer"

    def _write_loop(self) -> None:
        done = False
        while not done:
            events: list[BatchEvent] = []
            try:
                item = self._queue.get(timeout=FLUSH_SECONDS)
                while True:
                    if item is None:
                        done = True
                        break
                    events.append(item)
                    item = self._queue.get_nowait()
            except queue.Empty:
                pass
            if self._retry and self._append(self._retry):
                self._retry = []
            self._later += events
            if not self._retry and self._later:
                batch, self._later = self._later, []
                self._retry = [] if self._append(batch) else batch

    def _append(self, events: list[BatchEvent]) -> bool:
        """Append ``events`` as append number ``self._appends + 1`` of this run; False if it failed."""
        import pyarrow as pa
        from deltalake import CommitProperties, Transaction, write_deltalake

        number, app_id = self._appends + 1, f"deltaflow-event-log-{self.run_id}"
        try:
            log = self._log()
            if log is None or (log.transaction_version(app_id) or 0) < number:  # else its answer was lost
                rows = [{**asdict(e), "trigger": self.trigger} for e in events]
                for row in rows:
                    if row["kind"] == "batch":
                        row["delta_versions_behind"] = delta_versions_behind(
                            json.loads(row["sources"]), self.storage_options, self._opened)
                stamp = CommitProperties(app_transactions=[Transaction(app_id, number)])
                table = pa.Table.from_pylist(rows, schema=_schema())
                write_deltalake(self.path if log is None else log, table, mode="append",
                                schema_mode="merge",  # the logs of older versions have fewer columns
                                storage_options=self.storage_options if log is None else None,
                                commit_properties=stamp)
            self._appends, self._failing_since = number, None
            if number % COMPACT_EVERY == 0:
                self._compact()
            return True
        except Exception as exc:  # the log must never stop a flow; a log failing for long stops the run
            self.error = exc
            self._opened.pop(self.path, None)
            self._failing_since = self._failing_since or time.monotonic()
            return False

    def _log(self) -> DeltaTable | None:
        """The log's table, up to date (None: not created yet); opened once, then read incrementally."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        log = self._opened.get(self.path)
        if log is not None:
            log.update_incremental()
            return log
        try:
            log = self._opened[self.path] = DeltaTable(self.path, storage_options=self.storage_options)
        except TableNotFoundError:
            return None
        return log

    def _compact(self) -> None:
        """Merge the log's small files, and delete the merged ones an hour later (readers may hold them).

        Its Delta log too: an append a second is 86,400 commit files a day, each read by every reader that
        opens the table from its last checkpoint. So a checkpoint is written here, and commit files older
        than :data:`LOG_RETENTION` (and before that checkpoint) are deleted.
        """
        from deltalake import DeltaTable

        log = DeltaTable(self.path, storage_options=self.storage_options)
        log.optimize.compact()
        log.vacuum(retention_hours=1, enforce_retention_duration=False, dry_run=False)
        if log.metadata().configuration.get(_LOG_RETENTION_KEY) != LOG_RETENTION:
            log.alter.set_table_properties({_LOG_RETENTION_KEY: LOG_RETENTION})
        log.create_checkpoint()
        log.cleanup_metadata()
