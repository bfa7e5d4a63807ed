"""What a run reports: each committed micro-batch of a flow, and how each flow ended.

Examples:
    >>> FlowOutcome("silver", "defs.py:9", "completed").state
    'completed'

"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class BatchProgress:
    """One committed micro-batch of one flow (``batch_id`` None: a view's refresh outside any query)."""

    flow: str
    batch_id: int | None
    input_rows: int
    input_rows_per_second: float
    processed_rows_per_second: float
    duration_ms: int
    refresh: dict[str, Any] | None = None  # a materialized view's batch: its refresh (mode, rows_written)
    #: Rows written to the table, when the batch counted them (a flow with expectations); else None.
    written: int | None = None
    quarantined: int = 0  # by expect_or_quarantine rules and dp.parse_json
    dropped: int = 0  # by expect_or_drop rules
    duplicates: int = 0  # dropped by the flow's deduplication (Spark's state operators)

    @classmethod
    def of(cls, flow: str, progress: Mapping[str, Any], shared: bool = False) -> BatchProgress:
        """The batch of ``flow`` that Spark's progress JSON ``progress`` reports.

        A query that reads its input more than once counts the rows its flow read itself
        (:mod:`deltaflow.sinks.read_rows`): the batch has that count, and rates scaled to it. ``shared``:
        the query writes other flows too (one carrying another), so what it dropped or quarantined is not
        said to be this flow's.
        """
        from deltaflow.define.expectations import DROPPED, METRICS, QUARANTINED, ROWS
        from deltaflow.runtime.event_log import REFRESH_KEY
        from deltaflow.sinks.read_rows import observed_rows

        read = int(progress["numInputRows"])
        rows = observed_rows(progress)
        ratio = 1.0 if rows is None or not read else rows / read
        quality = {} if shared else (progress.get("observedMetrics") or {}).get(METRICS) or {}
        operators = () if shared else progress.get("stateOperators") or ()
        duplicates = sum(int((op.get("customMetrics") or {}).get("numDroppedDuplicateRows") or 0)
                         for op in operators)
        written = (int(quality[ROWS]) - int(quality.get(DROPPED) or 0) - int(quality.get(QUARANTINED) or 0)
                   if ROWS in quality else None)
        return cls(flow=flow, batch_id=int(progress["batchId"]), input_rows=read if rows is None else rows,
                   input_rows_per_second=float(progress.get("inputRowsPerSecond") or 0.0) * ratio,
                   processed_rows_per_second=float(progress.get("processedRowsPerSecond") or 0.0) * ratio,
                   duration_ms=int((progress.get("durationMs") or {}).get("triggerExecution", 0)),
                   refresh=progress.get(REFRESH_KEY), written=written,
                   quarantined=int(quality.get(QUARANTINED) or 0), dropped=int(quality.get(DROPPED) or 0),
                   duplicates=duplicates)

    @classmethod
    def of_refresh(cls, flow: str, duration_ms: int, refresh: Mapping[str, Any]) -> BatchProgress:
        """A view's refresh outside any query (a view without pipeline inputs): no batch id, no rows read.

        Examples:
            >>> BatchProgress.of_refresh("sizes", 120, {"mode": "full", "rows_written": 3}).refresh
            {'mode': 'full', 'rows_written': 3}

        """
        return cls(flow, None, 0, 0.0, 0.0, duration_ms, {k: refresh[k] for k in ("mode", "rows_written")})


@dataclass(frozen=True)
class FlowOutcome:
    """How a flow ended (``skipped``: not started, as ``upstream`` failed in the run; see ``holdback``)."""

    flow: str
    location: str
    state: Literal["completed", "stopped", "failed", "skipped", "not started"]
    error: str | None = None  # failed: the cause; skipped: why
    upstream: str | None = None  # skipped: the failed flow it waited for


ProgressCallback = Callable[[BatchProgress], None]
MessageCallback = Callable[[str], None]
