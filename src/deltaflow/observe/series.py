"""A flow's batches as time series for charts: fixed time buckets, so every rate is over a sound interval.

A rate computed per batch divides by the time since the previous batch, which can be milliseconds; here
each bucket (at least :data:`MIN_BUCKET_SECONDS`, at most :data:`MAX_POINTS` of them) adds up the rows of
the batches that ended in it and divides by the bucket's length (input) or by the time spent in batches
(processed).

Examples:
    >>> from datetime import UTC, datetime
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> b = [{"end_time": t, "input_rows": 50, "duration_ms": 500, "kafka_offsets_behind": 3,
    ...       "delta_versions_behind": None, "expectations": None}]
    >>> flow_series(b)["input_rps"]
    [10.0]

"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

#: The shortest bucket: a few batches' worth, so a rate is not one batch over its own few milliseconds.
MIN_BUCKET_SECONDS = 5.0
#: The most points a series has, whatever the history's length.
MAX_POINTS = 200
#: The history a series covers: this long before the flow's last batch.
SPAN_SECONDS = 3600.0
_NICE = (5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)


def bucket_seconds(span: float) -> float:
    """The bucket length for a history of ``span`` seconds: a round figure giving at most MAX_POINTS.

    Examples:
        >>> bucket_seconds(60), bucket_seconds(3_600), bucket_seconds(86_400)
        (5.0, 30.0, 600.0)

    """
    wanted = max(MIN_BUCKET_SECONDS, span / MAX_POINTS)
    return float(next((n for n in _NICE if n >= wanted), math.ceil(wanted / 86400) * 86400))


def recent(batches: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The batches of the last :data:`SPAN_SECONDS` before the newest one (oldest first)."""
    if not batches:
        return []
    since = batches[-1]["end_time"].timestamp() - SPAN_SECONDS
    return [b for b in batches if b["end_time"].timestamp() >= since]


def _buckets(batches: Sequence[dict[str, Any]]) -> tuple[float, list[list[dict[str, Any]]], list[float]]:
    batches = recent(batches)
    times = [b["end_time"].timestamp() for b in batches]
    size = bucket_seconds(times[-1] - times[0])
    first = math.floor(times[0] / size) * size
    groups: dict[int, list[dict[str, Any]]] = {}
    for when, row in zip(times, batches, strict=True):
        groups.setdefault(int((when - first) // size), []).append(row)
    keys = range(max(groups) + 1)
    return size, [groups.get(k, []) for k in keys], [first + (k + 1) * size for k in keys]


def flow_series(batches: Sequence[dict[str, Any]],
                samples: Sequence[tuple[float, int | None, int | None]] = ()) -> dict[str, list[Any]]:
    """A flow's batches (oldest first) as series: time (bucket end, epoch s), rates, backlog, duration.

    Buckets without a batch are kept (rates 0, other values null), so a stalled flow shows as a gap. The
    backlog a batch logs is the one it saw when it was planned (no rate limit: nothing); ``samples`` of the
    backlog measured since (``(epoch s, Kafka offsets, Delta versions)``, oldest first) win in their bucket.
    """
    if not batches:
        return {"t": [], "input_rps": [], "processed_rps": [], "kafka_offsets_behind": [],
                "delta_versions_behind": [], "duration_ms": [], "rows": [], "bucket_seconds": []}
    size, groups, ends = _buckets(batches)

    def last(group: list[dict[str, Any]], key: str) -> Any:
        values = [row[key] for row in group if row.get(key) is not None]
        return values[-1] if values else None

    rows = [sum(r["input_rows"] for r in g) for g in groups]
    busy = [sum(r["duration_ms"] for r in g) / 1000 for g in groups]
    kafka = [last(g, "kafka_offsets_behind") for g in groups]
    delta = [last(g, "delta_versions_behind") for g in groups]
    for when, offsets, versions in samples:
        at = int((when - (ends[0] - size)) // size)  # the bucket the sample falls in, as _buckets does
        if 0 <= at < len(ends):
            kafka[at], delta[at] = offsets, versions
    return {
        "t": ends,
        "input_rps": [n / size for n in rows],
        "processed_rps": [n / s if s > 0 else None for n, s in zip(rows, busy, strict=True)],
        "kafka_offsets_behind": kafka,
        "delta_versions_behind": delta,
        "duration_ms": [max((r["duration_ms"] for r in g), default=None) for g in groups],
        "rows": rows,
        "bucket_seconds": [size],
    }


def quality_series(batches: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Failed rows per expectation and rows checked, per bucket (same buckets as :func:`flow_series`)."""
    if not batches:
        return {"t": [], "failed": {}, "rows": []}
    _, groups, ends = _buckets(batches)
    counts = [[json.loads(r["expectations"]) for r in g if r.get("expectations")] for g in groups]
    names = sorted({k for group in counts for c in group for k in c if not k.startswith("_")})
    return {"t": ends, "rows": [sum(c.get("_rows", 0) for c in group) for group in counts],
            "failed": {n: [sum(c.get(n, 0) for c in group) for group in counts] for n in names}}
