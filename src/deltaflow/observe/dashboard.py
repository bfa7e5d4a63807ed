"""The dashboard's picture of a pipeline, from its event log, graph record, checkpoints and tables; no JVM.

:class:`Dashboard` builds one JSON-ready dict (the contract of ``deltaflow ui``'s page and ``/metrics``):
the dataset graph with each node's state, rows and version; per flow its status (:mod:`deltaflow.commands.
status`), bucketed series (:mod:`deltaflow.observe.series`) and last batch's duration breakdown; data
quality per table; the run history; the last errors with their definition's ``file:line``; maintenance.

The event log is read again only when its version changed; backlogs are measured at most every
:data:`BACKLOG_SECONDS`; table facts are kept per table version (:mod:`deltaflow.observe.table_facts`).

Examples:
    >>> board = Dashboard(spec, layout)  # doctest: +SKIP
    >>> state = board.state()  # doctest: +SKIP
    >>> [f["flow"] for f in state["flows"]]  # doctest: +SKIP
    ['bronze_clicks', 'silver_clicks']

"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from deltaflow.commands.status import (
    COLUMNS,
    WINDOW_SECONDS,
    event_rows,
    measure_backlog,
    quality_totals,
    summarize,
)
from deltaflow.observe.backlog import Backlog, BacklogProbe
from deltaflow.observe.graph_record import flow_locations, layered, read_graph_record
from deltaflow.observe.series import flow_series, quality_series
from deltaflow.observe.table_facts import TableFacts

if TYPE_CHECKING:
    from deltaflow.commands.status import FlowStatus
    from deltaflow.spec import Spec
    from deltaflow.storage import StorageLayout

#: Seconds between two measurements of the backlogs (each asks the brokers).
BACKLOG_SECONDS = 2.0
#: Backlog measurements kept per flow (an hour's worth).
SAMPLES = int(3600 / BACKLOG_SECONDS)
#: The last errors shown.
ERRORS = 20
#: The runs shown.
RUNS = 20
_EVENT_COLUMNS = [*COLUMNS, "run_id", "trigger", "durations_ms"]
#: A dataset's state is its worst flow's.
_SEVERITY = ["failed", "skipped", "falling_behind", "running", "silent", "stopped", "completed"]


def flow_state(status: FlowStatus) -> str:
    """The state the dashboard shows: ``falling_behind`` is a running flow that is falling behind."""
    return "falling_behind" if status.falling_behind else status.state


class Dashboard:
    """Builds the dashboard's state of one pipeline; safe to call from several threads.

    Args:
        spec: The pipeline's spec (its name and its Kafka brokers; no spec value is ever shown).
        layout: Its storage.

    """

    def __init__(self, spec: Spec, layout: StorageLayout) -> None:
        self.spec, self.layout = spec, layout
        self.probe = BacklogProbe(layout, spec.kafka_to_read)
        self.facts = TableFacts(layout)
        self._lock = threading.Lock()
        self._log: Any = None
        self._rows: list[dict[str, Any]] = []
        self._version = -1
        self._backlog: tuple[float, dict[str, Backlog]] = (0.0, {})
        # the backlogs measured while this dashboard runs, per flow, for the backlog chart
        self._samples: dict[str, deque[tuple[float, int | None, int | None]]] = {}

    def close(self) -> None:
        """Let go of the Kafka client."""
        self.probe.close()

    def state(self, now: datetime | None = None) -> dict[str, Any]:
        """The whole picture, as the page and ``/metrics`` use it (see the module docstring)."""
        return self.snapshot(now)[0]

    def snapshot(self, now: datetime | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """:meth:`state`, and the event-log rows it was built from (``/metrics`` counts them)."""
        with self._lock:
            self._refresh_events()
            rows = self._rows
            record = read_graph_record(self.layout)
            backlog = self._measure(rows)
        moment = now or datetime.now(UTC)
        statuses = summarize(rows, moment, backlog)
        locations = flow_locations(record)
        batches: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            if row["kind"] == "batch":
                batches.setdefault(row["flow"], []).append(row)
        flows = [self._flow(s, batches.get(s.flow, []), locations) for s in statuses]
        return ({
            "pipeline": self.spec.name, "storage": self.layout.root, "generated_at": moment.isoformat(),
            "event_log_version": self._version, "rate_window_seconds": WINDOW_SECONDS,
            "graph": self._graph(record, flows),
            "flows": flows,
            "quality": self._quality(batches, locations),
            "runs": _runs(rows, {s.flow: flow_state(s) for s in statuses}, _intake(record)),
            "errors": [{"at": r["end_time"].isoformat(), "flow": r["flow"], "error": r["error"],
                        "location": locations.get(r["flow"], ("", ""))[1]}
                       for r in reversed(rows) if r["kind"] == "failed"][:ERRORS],
            "maintenance": [f for name in _stored(record) if (f := self.facts.table(name)) is not None],
        }, rows)

    def _refresh_events(self) -> None:
        from deltalake.exceptions import TableNotFoundError

        try:
            if self._log is None:
                self._log = self.layout.open_table(self.layout.event_log)
            else:
                self._log.update_incremental()
        except TableNotFoundError:
            return  # no run yet: an empty picture
        version = self._log.version()
        if version == self._version:
            return
        self._rows = event_rows(self._log, self.spec.name, _EVENT_COLUMNS)
        self._version = version

    def _measure(self, rows: list[dict[str, Any]]) -> dict[str, Backlog]:
        taken, backlog = self._backlog
        if time.monotonic() - taken >= BACKLOG_SECONDS:
            backlog = measure_backlog(self.probe, self.layout, rows)
            self._backlog = (time.monotonic(), backlog)
            for flow, measured in backlog.items():
                self._samples.setdefault(flow, deque(maxlen=SAMPLES)).append(
                    (time.time(), measured.kafka_offsets, measured.delta_versions))
        return backlog

    def _flow(self, status: FlowStatus, batches: list[dict[str, Any]],
              locations: dict[str, tuple[str, str]]) -> dict[str, Any]:
        last = batches[-1] if batches else None
        dataset, location = locations.get(status.flow, (status.flow, ""))
        return {
            "flow": status.flow, "dataset": dataset, "location": location, "state": flow_state(status),
            "last_batch": status.last_batch,
            "last_batch_at": status.last_batch_at.isoformat() if status.last_batch_at else None,
            "age_seconds": status.age_seconds, "rows_total": status.rows_total,
            "input_rows_per_second": status.input_rows_per_second,
            "processed_rows_per_second": status.processed_rows_per_second,
            "rate_window_seconds": status.rate_window_seconds,
            "backlog": {"kafka_offsets": status.kafka_offsets_behind,
                        "delta_versions": status.delta_versions_behind, "measured": status.backlog_measured},
            "last_duration_ms": last["duration_ms"] if last else None,
            "last_durations_ms": json.loads(last["durations_ms"] or "{}") if last else {},
            "dropped": status.dropped_rows, "quarantined": status.quarantined_rows,
            "error": status.error, "series": flow_series(batches, list(self._samples.get(status.flow, ()))),
            "refreshes": status.refreshes, "rows_written": status.rows_written,
            "last_refresh_mode": status.last_refresh_mode,
        }

    def _graph(self, record: dict[str, Any] | None, flows: list[dict[str, Any]]) -> dict[str, Any]:
        if record is None:  # no run has resolved the graph yet: the flows the event log knows
            record = {"datasets": [{"dataset": f["dataset"], "kind": "table", "flows": [{"flow": f["flow"]}]}
                                   for f in flows]}
        nodes, edges = layered(record)
        states = {f["flow"]: f["state"] for f in flows}
        for node in nodes:
            known = [states[f] for f in node["flows"] if f in states]
            node["state"] = min(known, key=_SEVERITY.index) if known else None
            facts = self.facts.table(node["id"]) if node["kind"] != "source" else None
            node["rows"] = facts["rows"] if facts else None
            node["version"] = facts["version"] if facts else None
            node["label"] = node["id"] if node["kind"] == "source" else node["kind"].replace("_", " ")
        return {"nodes": nodes, "edges": edges}

    def _quality(self, batches: dict[str, list[dict[str, Any]]],
                 locations: dict[str, tuple[str, str]]) -> list[dict[str, Any]]:
        quality = []
        for flow, rows in sorted(batches.items()):
            checked = [r for r in rows if r.get("expectations")]
            if not checked:
                continue
            totals = quality_totals(checked)
            table = locations.get(flow, (flow, ""))[0]
            quality.append({
                "table": table, "flow": flow,
                "expectations": [{"name": n, "failed": count, "rows": totals.get("_rows", 0)}
                                 for n, count in sorted(totals.items()) if not n.startswith("_")],
                "dropped": totals.get("_dropped", 0), "quarantined": totals.get("_quarantined", 0),
                "series": quality_series(checked), "quarantine": self.facts.quarantine(table),
            })
        return quality


def _stored(record: dict[str, Any] | None) -> list[str]:
    """The tables of the pipeline: its stored datasets and their quarantine tables."""
    from deltaflow.storage import StorageLayout

    tables = []
    for dataset in (record or {}).get("datasets", []):
        if dataset.get("stored"):
            tables.append(dataset["dataset"])
        if any(f.get("quarantines") for f in dataset.get("flows", [])):
            tables.append(StorageLayout.quarantine_name(dataset["dataset"]))
    return tables


def _intake(record: dict[str, Any] | None) -> set[str] | None:
    """The flows that read from outside the pipeline (no pipeline input): what a run took in is theirs."""
    if record is None:
        return None
    return {f["flow"] for d in record.get("datasets", []) for f in d.get("flows", []) if not f.get("inputs")}


def _runs(rows: list[dict[str, Any]], current: dict[str, str], intake: set[str] | None = None,
          ) -> list[dict[str, Any]]:
    """Each run, newest first: its trigger, times, batches, rows taken in, each flow's end, its outcome.

    ``intake``: the flows whose input rows a run took in (default: every flow's).
    """
    runs: dict[str, dict[str, Any]] = {}
    for row in rows:
        run = runs.setdefault(row["run_id"], {
            "run_id": row["run_id"], "trigger": row.get("trigger"), "started": row["start_time"],
            "ended": row["end_time"], "batches": 0, "rows": 0, "flows": {}})
        run["ended"] = max(run["ended"], row["end_time"])
        if row["kind"] == "batch":
            run["batches"] += 1
            if intake is None or row["flow"] in intake:
                run["rows"] += row["input_rows"]
            run["flows"].setdefault(row["flow"], "running")
        else:
            run["flows"][row["flow"]] = row["kind"]
    newest = max(runs.values(), key=lambda r: r["started"])["run_id"] if runs else None
    found = []
    for run in sorted(runs.values(), key=lambda r: r["started"], reverse=True)[:RUNS]:
        flows = run["flows"]
        for flow, state in flows.items():  # the newest run's unfinished flows are as the status says
            if state == "running":
                flows[flow] = current.get(flow, "silent") if run["run_id"] == newest else "silent"
        ends = set(flows.values())
        outcome = next((s for s in ("failed", "skipped", "running", "falling_behind", "silent", "stopped")
                        if s in ends),
                       "completed")
        found.append({**run, "outcome": "running" if outcome == "falling_behind" else outcome,
                      "started": run["started"].isoformat(), "ended": run["ended"].isoformat()})
    return found
