"""Stopping streaming queries between batches, so that a stop never leaves a batch half-written.

Examples:
    >>> stop_between_batches({}, grace_seconds=1.0)

"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery


def stop_between_batches(queries: Mapping[str, StreamingQuery], grace_seconds: float) -> None:
    """Stop every query once the batch it was writing when asked (if any) has committed.

    Under steady input the next trigger starts the moment a batch commits, so "between batches" is an
    instant no poll can hit; instead each query is stopped as soon as a new batch has committed. A batch
    started in that instant is cancelled before its commit and replayed by the next run (its offsets are
    in the checkpoint), so nothing is lost or written twice. Past ``grace_seconds`` every query is stopped.
    """
    deadline = time.monotonic() + grace_seconds
    busy = {name: _last_batch(q) for name, q in queries.items()
            if q.isActive and q.status.get("isTriggerActive")}
    while busy and time.monotonic() < deadline:
        for name, last in list(busy.items()):
            query = queries[name]
            idle = not query.isActive or not query.status.get("isTriggerActive")
            if idle or _last_batch(query) != last:
                query.stop()
                del busy[name]
        time.sleep(0.02)
    for query in queries.values():
        query.stop()


def _last_batch(query: StreamingQuery) -> tuple[int, str] | None:
    progress = query.lastProgress
    return (progress.batchId, progress.timestamp) if progress is not None else None
