"""The windows a batch's late rows fall in, for an incremental view whose state keeps recent windows only.

A view refreshed with ``dp.by_window(..., lateness=...)`` reads its input with a watermark: Spark keeps a
window's totals (and its distinct values) in the state until the watermark, the newest event time seen
less ``lateness``, passes the window's end, and from then on drops the rows that still come for it. Those
rows are not lost from the view: after the batch's own write, the windows they fall in are recomputed from
the input (the by-window refresh) and replaced, so the view stays exact whatever the lateness.

Which rows a batch dropped is found without a Spark job in the usual case. The batch's watermark and the
input versions it read are in its checkpoint's offset log; the files those versions added carry their
smallest event time in the Delta log's statistics. A window is reported when it ended at or before the
batch's watermark: its state is gone after the batch (or was already), so a recompute cannot be
overwritten by the state's next totals. Only a row before the end of the newest such window
(:func:`closed_before`) can fall in one, so a file whose smallest time is not before that end holds no late
row: a row a little older than the watermark whose window is still open is in the state, not late. Only
files that might hold one (or that have no statistics) are read, and only their rows in closed windows.

Everything here is read from what the checkpoint and the Delta log hold, so a batch run again after a crash
finds the same windows.

Examples:
    >>> checkpoint = layout.checkpoint("gold", "gold")  # doctest: +SKIP
    >>> late_windows(spark, layout, checkpoint, 7, "silver", "event_timestamp", "1 hour")  # doctest: +SKIP
    [(1767225600000000, 1767229200000000)]

"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from deltaflow.errors import ConfigError
from deltaflow.spec.durations import parse_duration

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from deltaflow.storage import FlowCheckpoint, StorageLayout


@dataclass(frozen=True)
class BatchInput:
    """What one batch of a Delta-sourced query read, from its checkpoint's offset log.

    Attributes:
        watermark_ms: The event-time watermark the batch ran with (0: none yet).
        versions: The input table's versions whose added files the batch may have read (a superset).

    """

    watermark_ms: int
    versions: range


def batch_input(layout: StorageLayout, checkpoint: FlowCheckpoint, batch_id: int) -> BatchInput | None:
    """The watermark and input versions of batch ``batch_id`` (None: its offsets are not in the log).

    A Delta source's offset ``{reservoirVersion: v, index: i, isStartingVersion: s}`` says where a batch
    stopped: at file ``i`` of version ``v``, or, with ``s``, at the end of the snapshot of version ``v``
    read whole. A batch read from the previous batch's end to its own, so the versions from the one to the
    other (both included, after a snapshot the one after it) hold every file it read, and perhaps a few
    files of its neighbours: finding a late row there too only recomputes a window once more.
    """
    end = _entry(layout, checkpoint, batch_id)
    if end is None:
        return None
    metadata, offset = end
    watermark = int(metadata.get("batchWatermarkMs", 0))
    start = _entry(layout, checkpoint, batch_id - 1) if batch_id > 0 else None
    last = int(offset["reservoirVersion"])
    if start is None:
        return BatchInput(watermark, range(0, last + 1))
    first = int(start[1]["reservoirVersion"]) + (1 if start[1].get("isStartingVersion") else 0)
    return BatchInput(watermark, range(first, last + 1))


def late_windows(spark: SparkSession, layout: StorageLayout, checkpoint: FlowCheckpoint, batch_id: int,
                 table: str, column: str, duration: str) -> list[tuple[int, int]]:
    """The windows (start, end in microseconds) of batch ``batch_id``'s rows that came after their window.

    Args:
        spark: The session to read with (the batch's own), if files must be read.
        layout: The storage layout.
        checkpoint: The view's driver checkpoint.
        batch_id: The batch.
        table: The dataset the view aggregates.
        column: Its event-time column.
        duration: The view's window length, as given to ``F.window``.

    """
    read = batch_input(layout, checkpoint, batch_id)
    if read is None or read.watermark_ms <= 0:
        return []
    suspects = suspect_files(layout, table, read, column, duration)
    if not suspects:
        return []
    from pyspark.sql import functions as F

    root = layout.table(table)
    watermark = F.timestamp_millis(F.lit(read.watermark_ms))
    window = F.window(column, duration)
    rows = (spark.read.option("basePath", root)
            .parquet(*[f"{root}/{unquote(add['path'])}" for add in suspects])
            .where(F.col(column) < watermark)
            .select(window.alias("w")).where(F.col("w.end") <= watermark)
            .select(F.unix_micros("w.start").alias("start"), F.unix_micros("w.end").alias("end"))
            .distinct().collect())
    return sorted((int(row["start"]), int(row["end"])) for row in rows)


def suspect_files(layout: StorageLayout, table: str, read: BatchInput, column: str,
                  duration: str) -> list[dict[str, Any]]:
    """The files (``add`` actions) batch ``read`` may have read that may hold a row in a closed window."""
    closed = closed_before(read.watermark_ms, duration)
    return [add for version in read.versions for add in added_files(layout, table, version)
            if _may_be_before(add, column, closed)]


def closed_before(watermark_ms: int, duration: str) -> int:
    """The end (ms) of the newest ``duration`` window closed at ``watermark_ms``.

    Rows before it are in closed windows, rows from it on in open ones (Spark's tumbling windows start at
    multiples of their length). A length :func:`~deltaflow.spec.durations.parse_duration` cannot read gives
    the watermark itself (every row before it read).

    Examples:
        >>> closed_before(5_400_000, "1 hour"), closed_before(5_400_000, "1 fortnight")
        (3600000, 5400000)

    """
    try:
        length = round(parse_duration(duration).total_seconds() * 1000)
    except ConfigError:
        return watermark_ms
    return watermark_ms - watermark_ms % length if length > 0 else watermark_ms


def _entry(layout: StorageLayout, checkpoint: FlowCheckpoint, batch_id: int,
           ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The metadata and the (one) source offset of ``offsets/<batch_id>``."""
    text = layout.fs.read_text(f"{checkpoint.offsets}/{batch_id}")
    if text is None:
        return None
    lines = text.splitlines()
    return json.loads(lines[1]), json.loads(lines[2])


def added_files(layout: StorageLayout, table: str, version: int) -> list[dict[str, Any]]:
    """The files ``table``'s commit ``version`` added as new data (compaction's rewrites are not)."""
    text = layout.fs.read_text(layout.commit_file(table, version)) or ""
    actions = (json.loads(line) for line in text.splitlines() if line.strip())
    return [a["add"] for a in actions if "add" in a and a["add"].get("dataChange", True)]


def removed_rows(layout: StorageLayout, table: str, version: int) -> bool:
    """Whether ``table``'s commit ``version`` removed rows (an overwrite, RESTORE, DELETE; not compaction)."""
    text = layout.fs.read_text(layout.commit_file(table, version)) or ""
    actions = (json.loads(line) for line in text.splitlines() if line.strip())
    return any("remove" in a and a["remove"].get("dataChange", True) for a in actions)


def _may_be_before(add: dict[str, Any], column: str, moment_ms: int) -> bool:
    """Whether file ``add`` may hold a row of ``column`` before ``moment_ms`` (so without statistics)."""
    try:
        smallest = json.loads(add["stats"])["minValues"][column]
    except (KeyError, TypeError, ValueError):
        return True
    if smallest is None:
        return True
    moment = datetime.fromisoformat(str(smallest).replace("Z", "+00:00"))
    if moment.tzinfo is None:  # a TIMESTAMP_NTZ column: Spark's watermark takes it as UTC
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp() * 1000 < moment_ms
