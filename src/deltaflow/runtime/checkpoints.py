"""Checkpoint upkeep: clearing what a crash left half-written in a flow's checkpoint.

Where each checkpoint lives (``<storage>/_checkpoints/<dataset>/<flow>/<generation>``) is the storage
layout's business (:class:`~deltaflow.storage.layout.StorageLayout`); a user never writes one.

Example:
    >>> clear_interrupted_writes(layout.fs, layout.checkpoint("silver", "silver"))  # doctest: +SKIP
    []

"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deltaflow.storage import FileSystem, FlowCheckpoint

_INTERRUPTED = re.compile(r"^\..*\.tmp(\.crc)?$")


def clear_interrupted_writes(fs: FileSystem, checkpoint: FlowCheckpoint | str) -> list[str]:
    """Remove the temp files a crash left in ``checkpoint``'s logs, and return their paths.

    Spark writes each log entry (``offsets/N``, ``commits/N``) to a hidden temp file and renames it, so a
    process killed mid-write leaves a ``.N.<uuid>.tmp`` that was never a log entry. Spark ignores it when
    reading, but a query with nothing committed yet refuses to start on an ``offsets`` folder that is not
    empty (``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``), so the flow could never restart.
    """
    path = checkpoint if isinstance(checkpoint, str) else checkpoint.path
    removed = []
    for log in ("offsets", "commits"):
        for name in fs.list(f"{path}/{log}"):
            if _INTERRUPTED.match(name):
                fs.delete(f"{path}/{log}/{name}")
                removed.append(f"{path}/{log}/{name}")
    return removed
