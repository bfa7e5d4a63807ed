"""The rows a flow's micro-batch read, for a query that reads its input more than once.

Spark's ``numInputRows`` counts every scan of a source. A carrier's query (:mod:`deltaflow.sinks.carry`)
scans its batch once per table it writes, and an incremental view's (:mod:`deltaflow.sinks.incremental`)
once more per exact distinct count, so Spark reports each row two or more times. Such a query counts the
rows its flow read in an observed metric, :data:`ROWS_METRIC`, and what a run reports (the event log,
``status``, the metrics, the run's summary) takes that count, and scales the rates with it.

Examples:
    >>> observed_rows({"observedMetrics": {ROWS_METRIC: {"rows": 5}}}), observed_rows({})
    (5, None)

"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ROWS_METRIC = "deltaflow_rows"


def observed_rows(progress: Mapping[str, Any]) -> int | None:
    """The rows the flow read, from its query's progress JSON (None: Spark's own count is right)."""
    metric = (progress.get("observedMetrics") or {}).get(ROWS_METRIC) or {}
    return int(metric["rows"]) if "rows" in metric else None
