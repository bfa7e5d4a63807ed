"""Where each stream reading a table stands: the table version it reads from next, and since when.

A flow that streams a Delta table (running or stopped) restarts from its checkpoint: from the source
offset of its last committed batch, or, with no batch committed yet, from the snapshot its first batch
reads. It then needs every file that table version added or still held, and the change files of every
version after it. Cleanup that keeps whatever was removed since that version was committed can never
take a file such a flow still reads; that is the rule ``vacuum`` enforces and ``status`` warns about.

Read without Spark: every flow's checkpoint offset log (a Delta source there names the table it reads by
its id) and the table's Delta log.

Example:
    >>> [(p.flow, p.version) for p in stream_positions(layout, "bronze")]  # doctest: +SKIP
    [('silver', 12)]

"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from deltaflow.commands.tables import open_table

if TYPE_CHECKING:
    from deltaflow.storage import FlowCheckpoint, StorageLayout


@dataclass(frozen=True)
class StreamPosition:
    """The version of ``table`` that ``flow`` reads from next, and when that version was committed.

    ``committed_at`` is None when the table's log no longer holds that version: the flow cannot restart
    without a full refresh.
    """

    flow: str
    dataset: str  # the flow's target
    table: str
    version: int
    committed_at: datetime | None

    def age(self, now: datetime | None = None) -> timedelta | None:
        """How long ago the version the flow needs was committed."""
        if self.committed_at is None:
            return None
        return (now or datetime.now(UTC)) - self.committed_at


def stream_positions(layout: StorageLayout, table: str,
                     flows: Collection[str] | None = None) -> list[StreamPosition]:
    """Where every flow that streams ``table`` (its rows or its change feed) stands, oldest version first.

    Args:
        layout: The pipeline's storage.
        table: The table read.
        flows: Only these flows (default: every flow with a checkpoint on storage).

    Flows that never committed nor started a batch are left out: they will start from the newest version.

    """
    table_id = str(open_table(layout, table).metadata().id)
    positions = []
    for checkpoint in layout.current_checkpoints():
        if flows is not None and checkpoint.flow not in flows:
            continue
        version = checkpoint_position(layout, checkpoint, table_id)
        if version is not None:
            positions.append(StreamPosition(checkpoint.flow, checkpoint.dataset, table, version,
                                            commit_time(layout, table, version)))
    return sorted(positions, key=lambda p: p.version)


def checkpoint_position(layout: StorageLayout, checkpoint: FlowCheckpoint, table_id: str,
                        batch: int | None = None) -> int | None:
    """The version of the Delta table ``table_id`` the query checkpointed at ``checkpoint`` reads next.

    That is, after its last committed batch, or after ``batch`` when given.

    Spark's offset log holds, per batch, a line per source after two header lines; a Delta source's line is
    ``{"reservoirId": <table id>, "reservoirVersion": v, "isStartingVersion": ..., ...}``.
    """
    fs = layout.fs
    committed = [int(n) for n in fs.list(f"{checkpoint.path}/commits") if n.isdigit()]
    logged = [int(n) for n in fs.list(f"{checkpoint.path}/offsets") if n.isdigit()]
    if batch is None:
        batch = max(committed) if committed else min(logged, default=None)
    text = None if batch is None else fs.read_text(f"{checkpoint.path}/offsets/{batch}")
    for line in (text or "").splitlines()[2:]:
        try:
            offset = json.loads(line)
        except ValueError:
            continue
        if isinstance(offset, dict) and offset.get("reservoirId") == table_id:
            return int(offset["reservoirVersion"])
    return None


def commit_time(layout: StorageLayout, table: str, version: int) -> datetime | None:
    """When ``version`` of ``table`` was committed (None: the log no longer holds it)."""
    text = layout.fs.read_text(layout.commit_file(table, version))
    for line in (text or "").splitlines():
        info = json.loads(line).get("commitInfo") if line else None
        if info and "timestamp" in info:
            return datetime.fromtimestamp(int(info["timestamp"]) / 1000, UTC)
    return None
