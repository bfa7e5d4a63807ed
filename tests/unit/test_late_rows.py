"""Which files an incremental view's batch reads for late rows: none whose rows are all in open windows."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deltaflow.sinks.late_rows import batch_input, closed_before, suspect_files
from deltaflow.storage import StorageLayout

HOUR_MS = 3_600_000


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def write_batch(layout: StorageLayout, watermark_ms: int, smallest_ms: int) -> None:
    """Batch 1 of gold's checkpoint read silver's version 1: one file, its smallest time ``smallest_ms``."""
    offsets = layout.checkpoint("gold", "gold").offsets
    Path(offsets).mkdir(parents=True)
    for batch, version in ((0, 0), (1, 1)):
        metadata = {"batchWatermarkMs": watermark_ms if batch else 0, "batchTimestampMs": 0}
        offset = {"sourceVersion": 1, "reservoirVersion": version, "index": -1, "isStartingVersion": False}
        Path(f"{offsets}/{batch}").write_text(f"v1\n{json.dumps(metadata)}\n{json.dumps(offset)}\n")
    commit = Path(layout.commit_file("silver", 1))
    commit.parent.mkdir(parents=True)
    stats = json.dumps({"numRecords": 5, "minValues": {"event_timestamp": iso(smallest_ms)}})
    commit.write_text(json.dumps({"add": {"path": "part-0.parquet", "dataChange": True, "stats": stats}}))


def test_the_end_of_the_newest_closed_window() -> None:
    assert closed_before(10 * HOUR_MS + 50 * 60_000, "1 hour") == 10 * HOUR_MS
    assert closed_before(10 * HOUR_MS, "1 hour") == 10 * HOUR_MS  # a window ending at the watermark is closed
    assert closed_before(10 * HOUR_MS + 1, "10 minutes") == 10 * HOUR_MS
    assert closed_before(123_456, "every so often") == 123_456  # unreadable: the watermark itself


@pytest.mark.parametrize(("smallest", "read"), [
    (10 * HOUR_MS + 60_000, False),  # older than the watermark (10:50), but its hour (10:00-11:00) is open
    (10 * HOUR_MS - 1, True),  # 09:59:59.999: its hour closed at 10:00, the file must be read
])
def test_only_files_with_rows_in_closed_windows_are_read(tmp_path: Path, smallest: int, read: bool) -> None:
    layout = StorageLayout(str(tmp_path))
    write_batch(layout, watermark_ms=10 * HOUR_MS + 50 * 60_000, smallest_ms=smallest)
    batch = batch_input(layout, layout.checkpoint("gold", "gold"), 1)
    assert batch is not None and batch.versions == range(0, 2)  # from where batch 0 ended

    files = suspect_files(layout, "silver", batch, "event_timestamp", "1 hour")

    assert [add["path"] for add in files] == (["part-0.parquet"] if read else [])
    # A window length that cannot be read: every file with a row before the watermark is read.
    unknown = suspect_files(layout, "silver", batch, "event_timestamp", "some while")
    assert [add["path"] for add in unknown] == ["part-0.parquet"]
