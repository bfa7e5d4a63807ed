"""Where each stream reading a table stands: the table version it reads from next, and since when.

A flow that streams a Delta table (running or stopped) restarts from its checkpoint: from the source
offset of its last committed batch, or, with no batch committed yet, from the snapshot its first batch
reads. It then needs every file that table version added or still held, and the change files of every
version after it. Cleanup that keeps whatever was removed since that version was committed can never
take a file such a flow still reads; that is the rule ``vacuum`` enforces and ``status`` warns about.

Read without Spark: every flow's checkpoint offset log (a Delta source there names the table it reads by
its id) and the table's Delta log.

Examples:
    >>> bronze = {"bronze": open_table(layout, "bronze")}  # doctest: +SKIP
    >>> [(p.flow, p.version) for p in stream_positions(layout, bronze)["bronze"]]  # doctest: +SKIP
    [('silver', 12)]

"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deltalake import DeltaTable

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


def stream_positions(layout: StorageLayout, tables: Mapping[str, DeltaTable],
                     flows: Collection[str] | None = None) -> dict[str, list[StreamPosition]]:
    """Where every flow that streams each of ``tables`` (its rows or its change feed) stands, oldest first.

    Args:
        layout: The pipeline's storage.
        tables: The tables read, by name, already opened (their ids name them in the checkpoints).
        flows: Only these flows (default: every flow with a checkpoint on storage).

    Every checkpoint is read once for all ``tables``: on object storage each read is a request. Flows that
    never committed nor started a batch are left out (they will start from the newest version), unless they
    went on alone from a version of their input (:meth:`~deltaflow.storage.layout.StorageLayout.start_of`).

    """
    names = {str(delta.metadata().id): name for name, delta in tables.items()}
    positions: dict[str, list[StreamPosition]] = {name: [] for name in tables}
    for checkpoint in layout.current_checkpoints():
        if flows is not None and checkpoint.flow not in flows:
            continue
        offsets = checkpoint_offsets(layout, checkpoint)
        if not offsets and (start := layout.start_of(checkpoint)) is not None and start[0] in tables:
            offsets = {str(tables[start[0]].metadata().id): start[1]}  # it went on alone from there
        for table_id, version in offsets.items():
            if (name := names.get(table_id)) is not None:
                needed, committed_at = first_file_change(layout, name, version, tables[name].version())
                positions[name].append(StreamPosition(checkpoint.flow, checkpoint.dataset, name, needed,
                                                      committed_at))
    return {name: sorted(found, key=lambda p: p.version) for name, found in positions.items()}


def first_file_change(layout: StorageLayout, table: str, version: int, latest: int,
                      ) -> tuple[int, datetime | None]:
    """The first version of ``table`` from ``version`` on that adds or removes a file, and its commit time.

    A reader at ``version`` needs no file of the versions before that one: they change no file (VACUUM's
    own commits, a property change), so every file the reader needs is added or removed at it or later.
    ``(latest + 1, None)`` when no version up to ``latest`` changes a file (the reader needs nothing yet);
    ``(v, None)`` when the log no longer holds version ``v``.
    """
    for at in range(version, latest + 1):
        text = layout.fs.read_text(layout.commit_file(table, at))
        if text is None:
            return at, None
        actions = [json.loads(line) for line in text.splitlines() if line.strip()]
        if any(kind in action for action in actions for kind in ("add", "remove", "cdc")):
            info = next((a["commitInfo"] for a in actions if "timestamp" in a.get("commitInfo", {})), None)
            return at, datetime.fromtimestamp(int(info["timestamp"]) / 1000, UTC) if info else None
    return latest + 1, None


def checkpoint_position(layout: StorageLayout, checkpoint: FlowCheckpoint, table_id: str,
                        batch: int | None = None) -> int | None:
    """The version of the Delta table ``table_id`` the query checkpointed at ``checkpoint`` reads next.

    That is, after its last committed batch, or after ``batch`` when given.
    """
    return checkpoint_offsets(layout, checkpoint, batch).get(table_id)


def checkpoint_offsets(layout: StorageLayout, checkpoint: FlowCheckpoint, batch: int | None = None,
                       ) -> dict[str, int]:
    """The Delta tables (by id) the query at ``checkpoint`` streams, each with the version it reads next.

    After its last committed batch, or after ``batch`` when given; with no batch committed, from the
    snapshot its first batch reads. Spark's offset log holds, per batch, a line per source after two header
    lines; a Delta source's line is ``{"reservoirId": <table id>, "reservoirVersion": v, ...}``. A table
    read twice by one query counts at the older of its two versions.
    """
    fs = layout.fs
    committed = [int(n) for n in fs.list(checkpoint.commits) if n.isdigit()]
    logged = [int(n) for n in fs.list(checkpoint.offsets) if n.isdigit()]
    if batch is None:
        batch = max(committed) if committed else min(logged, default=None)
    return {table_id: version for table_id, (version, _) in _delta_offsets(layout, checkpoint, batch).items()}


def log_restart_offsets(layout: StorageLayout, checkpoint: FlowCheckpoint) -> dict[str, int | None]:
    """The Delta tables (by id) the query at ``checkpoint`` streams, with the log entry its restart reads.

    On restart Spark plans the newest batch of its offset log again, committed or not (it calls a V1
    source's ``getBatch(start, end)``, so that the source can pick up where it was), and Delta's source
    reads the table's log from that batch's start: the offset of the batch before, older than the one
    :func:`checkpoint_offsets` gives. With only batch 0 logged, the start is the snapshot its offset names
    while the query still reads one, else the version before it or the query's ``startingVersion``, which
    the checkpoint does not hold: None, the whole log, until the query's next batch.
    """
    logged = [int(n) for n in layout.fs.list(checkpoint.offsets) if n.isdigit()]
    if not logged:
        return {}
    if (newest := max(logged)) > 0:
        return {table_id: version for table_id, (version, _) in
                _delta_offsets(layout, checkpoint, newest - 1).items()}
    return {table_id: version if snapshot else None
            for table_id, (version, snapshot) in _delta_offsets(layout, checkpoint, 0).items()}


def _delta_offsets(layout: StorageLayout, checkpoint: FlowCheckpoint, batch: int | None,
                   ) -> dict[str, tuple[int, bool]]:
    """Each Delta table's offset after ``batch``: the version read next, and whether it is a snapshot."""
    text = None if batch is None else layout.fs.read_text(f"{checkpoint.offsets}/{batch}")
    offsets: dict[str, tuple[int, bool]] = {}
    for line in (text or "").splitlines()[2:]:
        try:
            offset = json.loads(line)
        except ValueError:
            continue
        if isinstance(offset, dict) and "reservoirId" in offset:
            table_id = str(offset["reservoirId"])
            found = (int(offset["reservoirVersion"]), bool(offset.get("isStartingVersion")))
            offsets[table_id] = min(found, offsets.get(table_id, found))
    return offsets


def commit_time(layout: StorageLayout, table: str, version: int) -> datetime | None:
    """When ``version`` of ``table`` was committed (None: the log no longer holds it)."""
    text = layout.fs.read_text(layout.commit_file(table, version))
    for line in (text or "").splitlines():
        info = json.loads(line).get("commitInfo") if line else None
        if info and "timestamp" in info:
            return datetime.fromtimestamp(int(info["timestamp"]) / 1000, UTC)
    return None
