"""Where each flow keeps its checkpoint: ``<storage>/_checkpoints/<dataset>/<flow>/<generation>``.

A user never writes a checkpoint location. Each flow has its own folder, so each restarts on its own;
the generation (``0``, ``1``...) moves forward on a full refresh, which starts the flow from scratch.

Example:
    >>> checkpoint_path("/data", "bronze_clicks", "bronze_clicks", 0)
    '/data/_checkpoints/bronze_clicks/bronze_clicks/0'

"""

from __future__ import annotations

from pathlib import Path


def checkpoint_root(storage: str, dataset: str, flow: str) -> str:
    """The folder holding every generation of one flow's checkpoint."""
    return f"{storage}/_checkpoints/{dataset}/{flow}"


def checkpoint_path(storage: str, dataset: str, flow: str, generation: int) -> str:
    """The checkpoint location of one generation of a flow."""
    return f"{checkpoint_root(storage, dataset, flow)}/{generation}"


def current_generation(storage: str, dataset: str, flow: str) -> int:
    """The newest generation on disk (0 for a flow that never ran). Local storage only for now."""
    root = Path(checkpoint_root(storage, dataset, flow))
    generations = [int(p.name) for p in root.glob("*") if p.is_dir() and p.name.isdigit()]
    return max(generations, default=0)


def clear_interrupted_writes(checkpoint: str) -> list[Path]:
    """Remove the temp files a crash left in ``checkpoint``'s logs, and return them.

    Spark writes each log entry (``offsets/N``, ``commits/N``) to a hidden temp file and renames it, so a
    process killed mid-write leaves a ``.N.<uuid>.tmp`` that was never a log entry. Spark ignores it when
    reading, but a query with nothing committed yet refuses to start on an ``offsets`` folder that is not
    empty (``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``), so the flow could never restart. Local storage
    only, like the rest of this module.
    """
    removed = []
    for log in ("offsets", "commits"):
        for leftover in Path(checkpoint, log).glob(".*.tmp*"):
            if leftover.name.endswith((".tmp", ".tmp.crc")):
                leftover.unlink(missing_ok=True)
                removed.append(leftover)
    return removed


def start_generation(storage: str, dataset: str, flow: str, generation: int) -> str:
    """Make ``generation`` the flow's current one (an empty checkpoint: the flow starts from scratch)."""
    path = checkpoint_path(storage, dataset, flow, generation)
    Path(path).mkdir(parents=True, exist_ok=True)
    return path
