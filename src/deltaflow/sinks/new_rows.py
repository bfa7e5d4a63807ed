"""Whether a micro-batch of a view's driver stream brings a new row, told from the Delta logs alone.

A view over append-only inputs needs no refresh for a batch whose versions add no data file: a table
property set upstream, a compaction (``dataChange=false``). Asking Spark (``batch.isEmpty()``) would run a
job over the batch, and count the rows it peeked at as the batch's input; the batch's range of versions is
in the view's own checkpoint (the offsets of the batch before and of this one), and each version's log
entry says whether it adds data.

Examples:
    >>> adds_rows(layout, checkpoint, ["silver"], 7)  # doctest: +SKIP
    False

"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import TYPE_CHECKING

from deltaflow.commands.readers import checkpoint_offsets

if TYPE_CHECKING:
    from deltaflow.storage import FlowCheckpoint, StorageLayout


def adds_rows(layout: StorageLayout, checkpoint: FlowCheckpoint, inputs: Collection[str], batch: int) -> bool:
    """Whether batch ``batch`` of the stream at ``checkpoint`` reads a version adding data to ``inputs``.

    Args:
        layout: The pipeline's storage.
        checkpoint: The view's driver checkpoint (its offsets log has batch ``batch`` and the one before).
        inputs: The input tables.
        batch: A batch id over 0.

    Returns:
        False only when every version in the batch is known to add no data file; True when not known.

    """
    before = checkpoint_offsets(layout, checkpoint, batch - 1)
    after = checkpoint_offsets(layout, checkpoint, batch)
    for name in inputs:
        table_id = str(layout.open_table(layout.table(name)).metadata().id)  # as the offsets name it
        if table_id not in before or table_id not in after:
            return True
        for version in range(before[table_id], after[table_id] + 1):  # (its last may be only begun)
            text = layout.fs.read_text(layout.commit_file(name, version))
            if text is None:
                if version < after[table_id]:
                    return True  # no longer in the log: not known
                continue
            for line in text.splitlines():
                action = json.loads(line) if line.strip() else {}
                if "add" in action and action["add"].get("dataChange", True):
                    return True
    return False
