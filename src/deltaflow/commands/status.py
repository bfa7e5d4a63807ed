"""``deltaflow status``: each flow's state, last batch, rates and backlog, from the event log, without Spark.

The event log (``<storage>/_event_log``, see :mod:`deltaflow.runtime.event_log`) is read with ``deltalake``,
so the answer comes in well under a second and needs no running pipeline.

Example:
    >>> for flow in pipeline_status(load_spec()):  # doctest: +SKIP
    ...     print(flow.flow, flow.state, flow.last_batch)
    bronze_clicks running 41

"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from statistics import fmean
from typing import TYPE_CHECKING, Any

from deltaflow.commands.horizons import retention_warnings
from deltaflow.commands.tables import query_rows
from deltaflow.errors import ConfigError

if TYPE_CHECKING:
    from deltaflow.spec import Spec
    from deltaflow.storage import StorageLayout

#: Batches (with input) the rates and the falling-behind check look at.
WINDOW = 10
#: A flow whose input outruns its processing by this factor over the window is falling behind.
BEHIND_FACTOR = 1.1
#: Seconds without an event after which a flow that did not log its end is reported as silent.
SILENT_AFTER = 120.0

_COLUMNS = ["flow", "kind", "batch_id", "end_time", "input_rows", "input_rows_per_second",
            "processed_rows_per_second", "delta_versions_behind", "kafka_offsets_behind", "expectations",
            "error"]


@dataclass(frozen=True)
class FlowStatus:
    """What the event log says about one flow."""

    flow: str
    state: str  # running, silent (no event for a while, no end logged), completed, stopped, failed
    last_batch: int | None
    last_batch_at: datetime | None
    age_seconds: float | None
    input_rows_per_second: float | None
    processed_rows_per_second: float | None
    delta_versions_behind: int | None
    kafka_offsets_behind: int | None
    falling_behind: bool
    dropped_rows: int  # by expect_or_drop rules, over every logged batch
    quarantined_rows: int  # by expect_or_quarantine rules and dp.parse_json, over every logged batch
    error: str | None
    warnings: tuple[str, ...] = ()  # a stopped flow nearing the horizon of a table it reads

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready dict (times in ISO 8601)."""
        data = asdict(self)
        data["last_batch_at"] = self.last_batch_at.isoformat() if self.last_batch_at else None
        return data


def pipeline_status(spec: Spec, layout: StorageLayout, now: datetime | None = None) -> list[FlowStatus]:
    """The status of every flow that has logged an event, in name order.

    A flow that is not running is also checked against the retention of the tables it streams
    (:mod:`deltaflow.commands.horizons`).

    Raises:
        ConfigError: The pipeline has not run yet (no event log).

    """
    from deltalake.exceptions import TableNotFoundError

    try:
        log = layout.open_table(layout.event_log)
    except TableNotFoundError:
        raise ConfigError(f"no event log in {layout.root}: the pipeline has not run yet",
                          hint="run it with 'deltaflow run'") from None
    present = {f.name for f in log.schema().fields}  # a log written by an older deltaflow lacks newer columns
    found = query_rows(log, [c for c in _COLUMNS if c in present], {"pipeline": spec.name})
    rows: list[dict[str, Any]] = [{c: row.get(c) for c in _COLUMNS} for row in found]
    by_flow: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: r["end_time"]):
        by_flow.setdefault(row["flow"], []).append(row)
    moment = now or datetime.now(UTC)
    flows = [_flow_status(flow, events, moment) for flow, events in sorted(by_flow.items())]
    stopped = [f.flow for f in flows if f.state != "running"]
    warnings = retention_warnings(layout, stopped, moment) if stopped else {}
    return [replace(f, warnings=tuple(warnings.get(f.flow, ()))) for f in flows]


def _flow_status(flow: str, events: list[dict[str, Any]], now: datetime) -> FlowStatus:
    batches = [e for e in events if e["kind"] == "batch"]
    busy = [e for e in batches if e["input_rows"]][-WINDOW:]
    last = events[-1]
    age = (now - last["end_time"]).total_seconds()
    state = last["kind"] if last["kind"] != "batch" else ("running" if age < SILENT_AFTER else "silent")
    rate_in = fmean(e["input_rows_per_second"] for e in busy) if busy else None
    rate_done = fmean(e["processed_rows_per_second"] for e in busy) if busy else None
    newest = batches[-1] if batches else None
    behind = [e["kafka_offsets_behind"] for e in batches[-WINDOW:] if e["kafka_offsets_behind"] is not None]
    growing = len(behind) >= 3 and behind[-1] > behind[0] > 0
    outrun = len(busy) >= 3 and rate_in is not None and rate_done is not None and \
        rate_in > BEHIND_FACTOR * rate_done
    last_busy = busy[-1] if busy else None
    counts = [json.loads(e["expectations"]) for e in batches if e["expectations"]]
    return FlowStatus(
        flow=flow, state=state,
        last_batch=last_busy["batch_id"] if last_busy else None,
        last_batch_at=last_busy["end_time"] if last_busy else None,
        age_seconds=(now - last_busy["end_time"]).total_seconds() if last_busy else None,
        input_rows_per_second=rate_in, processed_rows_per_second=rate_done,
        delta_versions_behind=newest["delta_versions_behind"] if newest else None,
        kafka_offsets_behind=newest["kafka_offsets_behind"] if newest else None,
        falling_behind=state == "running" and (outrun or growing),
        dropped_rows=sum(c.get("_dropped", 0) for c in counts),
        quarantined_rows=sum(c.get("_quarantined", 0) for c in counts),
        error=last["error"] if last["kind"] == "failed" else None,
    )
