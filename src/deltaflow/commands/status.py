"""``deltaflow status``: each flow's state, last batch, rates and backlog, from the event log, without Spark.

The event log (``<storage>/_event_log``, see :mod:`deltaflow.runtime.event_log`) is read with ``deltalake``,
so the answer comes in well under a second and needs no running pipeline. Rates are over the last
:data:`WINDOW_SECONDS` of a flow's activity (and say over how long); the backlog is measured now, from the
flow's checkpoint against its Kafka topics and Delta tables (:mod:`deltaflow.observe.backlog`), falling
back to the one its last batch logged.

Examples:
    >>> for flow in pipeline_status(load_spec()):  # doctest: +SKIP
    ...     print(flow.flow, flow.state, flow.last_batch)
    bronze_clicks running 41

"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from statistics import fmean
from typing import TYPE_CHECKING, Any

from deltaflow.commands.horizons import retention_warnings
from deltaflow.commands.tables import query_rows
from deltaflow.errors import ConfigError

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from deltaflow.observe.backlog import Backlog, BacklogProbe
    from deltaflow.spec import Spec
    from deltaflow.storage import StorageLayout

#: Seconds of a flow's latest activity its rates are computed over.
WINDOW_SECONDS = 60.0
#: Rates over less time than this are not shown: a few milliseconds would give absurd figures.
MIN_WINDOW_SECONDS = 2.0
#: Batches the growing-backlog check looks at.
BACKLOG_BATCHES = 10
#: A Kafka backlog worth more than this many batches of the flow's input means it is falling behind.
BEHIND_BATCHES = 3
#: The state of a flow that has logged nothing yet.
NOT_RUN = "not run yet"
#: Seconds without an event after which a flow that did not log its end is reported as silent.
SILENT_AFTER = 120.0

COLUMNS = ["flow", "kind", "batch_id", "start_time", "end_time", "input_rows", "duration_ms",
           "delta_versions_behind", "kafka_offsets_behind", "expectations", "error", "sources", "refresh"]


@dataclass(frozen=True)
class FlowStatus:
    """What the event log (and, for the backlog, the flow's checkpoint and sources) says about one flow."""

    flow: str
    state: str  # running, silent (no event for a while, no end logged), completed, stopped, failed, skipped,
    # not run yet
    last_batch: int | None
    last_batch_at: datetime | None
    age_seconds: float | None
    rows_total: int  # rows read over every logged batch
    input_rows_per_second: float | None  # rows read per second of the window
    processed_rows_per_second: float | None  # rows read per second spent in batches, over the window
    rate_window_seconds: float | None  # the window the rates are over (None: too short for a rate)
    delta_versions_behind: int | None
    kafka_offsets_behind: int | None
    backlog_measured: str  # "now" (checkpoint against the sources) or "last batch" (the event log's)
    falling_behind: bool
    dropped_rows: int  # by expect_or_drop rules, over every logged batch
    quarantined_rows: int  # by expect_or_quarantine rules and dp.parse_json, over every logged batch
    error: str | None  # failed: the cause; skipped: the failed flow upstream ("upstream 'x' failed")
    warnings: tuple[str, ...] = ()  # a stopped flow nearing the horizon of a table it reads
    refreshes: int = 0  # a materialized view's: batches that refreshed it
    rows_written: int = 0  # rows its refreshes wrote (a MERGE: the groups it changed)
    last_refresh_mode: str | None = None  # full, windows or incremental

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready dict (times in ISO 8601)."""
        data = asdict(self)
        data["last_batch_at"] = self.last_batch_at.isoformat() if self.last_batch_at else None
        return data


def read_events(layout: StorageLayout, pipeline: str, columns: list[str] | None = None,
                ) -> list[dict[str, Any]]:
    """The event log's rows of ``pipeline`` (``columns``, default :data:`COLUMNS`), oldest first.

    Raises:
        ConfigError: The pipeline has not run yet (no event log).

    """
    from deltalake.exceptions import TableNotFoundError

    try:
        log = layout.open_table(layout.event_log)
    except TableNotFoundError:
        raise ConfigError(f"no event log in {layout.root}: the pipeline has not run yet",
                          hint="run it with 'deltaflow run'") from None
    return event_rows(log, pipeline, columns or COLUMNS)


def event_rows(log: DeltaTable, pipeline: str, columns: list[str]) -> list[dict[str, Any]]:
    """``columns`` of the rows of ``pipeline`` in the open event log ``log``, oldest first.

    A column an older deltaflow did not write is None.
    """
    present = {f.name for f in log.schema().fields}
    found = query_rows(log, [c for c in columns if c in present], {"pipeline": pipeline})
    return sorted(({c: row.get(c) for c in columns} for row in found), key=lambda r: r["end_time"])


def pipeline_status(spec: Spec, layout: StorageLayout, now: datetime | None = None,
                    probe: BacklogProbe | None = None, declared: Sequence[str] = ()) -> list[FlowStatus]:
    """The status of every flow that has logged an event, in name order, with its backlog as it is now.

    A flow that is not running is also checked against the retention of the tables it streams
    (:mod:`deltaflow.commands.horizons`). A ``declared`` flow without an event (the pipeline, or that
    flow, has not run yet) is listed as ``not run yet``.
    """
    from deltaflow.observe.backlog import BacklogProbe

    try:
        rows = read_events(layout, spec.name)
    except ConfigError:  # no event log: nothing ran yet
        rows = []
    logged = {row["flow"] for row in rows}
    waiting = [not_run(flow) for flow in declared if flow not in logged]
    if not rows:
        return sorted(waiting, key=lambda f: f.flow)
    moment = now or datetime.now(UTC)  # one moment for the states and the retention warnings
    own = probe or BacklogProbe(layout, spec.kafka_to_read)
    try:
        flows = summarize(rows, moment, measure_backlog(own, layout, rows))
    finally:
        if probe is None:
            own.close()
    stopped = [f.flow for f in flows if f.state != "running"]
    warnings = retention_warnings(layout, stopped, moment) if stopped else {}
    return sorted([replace(f, warnings=tuple(warnings.get(f.flow, ()))) for f in flows] + waiting,
                  key=lambda f: f.flow)


def not_run(flow: str) -> FlowStatus:
    """The status of a declared flow that has logged nothing yet."""
    return FlowStatus(flow=flow, state=NOT_RUN, last_batch=None, last_batch_at=None, age_seconds=None,
                      rows_total=0, input_rows_per_second=None, processed_rows_per_second=None,
                      rate_window_seconds=None, delta_versions_behind=None, kafka_offsets_behind=None,
                      backlog_measured="last batch", falling_behind=False, dropped_rows=0, quarantined_rows=0,
                      error=None)


def measure_backlog(probe: BacklogProbe, layout: StorageLayout, rows: list[dict[str, Any]],
                    ) -> dict[str, Backlog]:
    """The backlog now of every flow with a checkpoint, its sources named by its newest logged batch."""
    descriptions: dict[str, list[str]] = {}
    for row in rows:
        if row["kind"] == "batch" and row.get("sources"):
            descriptions[row["flow"]] = [str(s.get("description")) for s in json.loads(row["sources"])]
    flows = {c.flow: (c.dataset, descriptions.get(c.flow, [])) for c in layout.current_checkpoints()}
    return probe.measure(flows)


def summarize(rows: list[dict[str, Any]], now: datetime, backlog: Mapping[str, Backlog] | None = None,
              ) -> list[FlowStatus]:
    """Each flow's status from its event-log rows (oldest first), in name order; see :func:`flow_status`."""
    by_flow: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_flow.setdefault(row["flow"], []).append(row)
    measured = backlog or {}
    return [flow_status(flow, events, now, measured.get(flow)) for flow, events in sorted(by_flow.items())]


def quality_totals(batches: list[dict[str, Any]]) -> dict[str, int]:
    """The data-quality counts of ``batches`` added up.

    Each expectation's failed rows by its name, and ``_rows``, ``_dropped``, ``_quarantined``, ``_unparsed``.

    Examples:
        >>> quality_totals([{"expectations": '{"_rows": 5, "positive": 1}'}, {"expectations": None}])
        {'_rows': 5, 'positive': 1}

    """
    totals: dict[str, int] = {}
    for batch in batches:
        for name, count in json.loads(batch.get("expectations") or "{}").items():
            totals[name] = totals.get(name, 0) + int(count)
    return totals


def window_rates(batches: list[dict[str, Any]], end: datetime, seconds: float = WINDOW_SECONDS,
                 ) -> tuple[float | None, float | None, float | None]:
    """Rows read per second, and per second spent in batches, over the ``seconds`` before ``end``.

    Returns ``(input, processed, window)``; all None when the batches span less than
    :data:`MIN_WINDOW_SECONDS`.

    Examples:
        >>> t = datetime(2026, 1, 1, tzinfo=UTC)
        >>> b = [{"start_time": t, "end_time": t + timedelta(seconds=4), "input_rows": 800,
        ...       "duration_ms": 2000}]
        >>> window_rates(b, t + timedelta(seconds=4))
        (200.0, 400.0, 4.0)

    """
    begin = end - timedelta(seconds=seconds)
    recent = [b for b in batches if b["end_time"] > begin]
    if not recent:
        return None, None, None
    span = (end - max(begin, min(b["start_time"] for b in recent))).total_seconds()
    if span < MIN_WINDOW_SECONDS:
        return None, None, None
    rows = sum(b["input_rows"] for b in recent)
    busy = sum(b["duration_ms"] for b in recent) / 1000
    return rows / span, (rows / busy if busy > 0 else None), span


def flow_status(flow: str, events: list[dict[str, Any]], now: datetime, backlog: Backlog | None = None,
                ) -> FlowStatus:
    """One flow's status from its event-log rows, oldest first, and its backlog now when measured."""
    batches = [e for e in events if e["kind"] == "batch"]
    busy = [e for e in batches if e["input_rows"] or e.get("refresh")]  # a view's first batch reads none
    refreshes = [json.loads(e["refresh"]) for e in batches if e.get("refresh")]
    last = events[-1]
    age = (now - last["end_time"]).total_seconds()
    state = last["kind"] if last["kind"] != "batch" else ("running" if age < SILENT_AFTER else "silent")
    end = now if state == "running" or not batches else batches[-1]["end_time"]
    rate_in, rate_done, window = window_rates(batches, end)
    newest = batches[-1] if batches else None
    kafka = backlog.kafka_offsets if backlog else None
    versions = backlog.delta_versions if backlog else None
    measured = "now" if kafka is not None or versions is not None else "last batch"
    if measured == "last batch" and newest is not None:
        kafka, versions = newest["kafka_offsets_behind"], newest["delta_versions_behind"]
    behind = [e["kafka_offsets_behind"] for e in batches[-BACKLOG_BATCHES:]
              if e["kafka_offsets_behind"] is not None]
    growing = len(behind) >= 3 and behind[-1] > behind[0] > 0
    recent = [b["duration_ms"] for b in batches if b["end_time"] > end - timedelta(seconds=WINDOW_SECONDS)]
    # keeping up, a flow finds about one batch's worth of input waiting; several batches' worth is a queue
    queued = measured == "now" and kafka is not None and rate_in is not None and bool(recent) and \
        kafka > BEHIND_BATCHES * rate_in * max(fmean(recent) / 1000, 1.0)
    last_busy = busy[-1] if busy else None
    quality = quality_totals(batches)
    return FlowStatus(
        flow=flow, state=state,
        last_batch=last_busy["batch_id"] if last_busy else None,
        last_batch_at=last_busy["end_time"] if last_busy else None,
        age_seconds=(now - last_busy["end_time"]).total_seconds() if last_busy else None,
        rows_total=sum(e["input_rows"] for e in batches),
        input_rows_per_second=rate_in, processed_rows_per_second=rate_done, rate_window_seconds=window,
        delta_versions_behind=versions, kafka_offsets_behind=kafka, backlog_measured=measured,
        falling_behind=state == "running" and (growing or queued),
        dropped_rows=quality.get("_dropped", 0), quarantined_rows=quality.get("_quarantined", 0),
        error=last["error"] if last["kind"] in ("failed", "skipped") else None,
        refreshes=len(refreshes), rows_written=sum(r.get("rows_written") or 0 for r in refreshes),
        last_refresh_mode=refreshes[-1]["mode"] if refreshes else None,
    )
