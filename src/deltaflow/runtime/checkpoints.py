"""Checkpoint upkeep: clearing what a crash left half-written, and copying a checkpoint as it once stood.

Where each checkpoint lives (``<storage>/_checkpoints/<dataset>/<flow>/<generation>``) is the storage
layout's business (:class:`~deltaflow.storage.layout.StorageLayout`); a user never writes one.

Examples:
    >>> clear_interrupted_writes(layout.fs, layout.checkpoint("silver", "silver"))  # doctest: +SKIP
    []

"""

from __future__ import annotations

import json
import re
import uuid
from typing import TYPE_CHECKING

from deltaflow.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable

    from deltaflow.storage import FileSystem, FlowCheckpoint

_INTERRUPTED = re.compile(r"^\..*\.tmp(\.crc)?$")
_NUMBERED = re.compile(r"^\.?(\d+)(\.[a-z]+)?(\.crc)?$")  # a log entry (offsets/7, sources/0/9.compact)


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


def unfinished_batch(fs: FileSystem, checkpoint: FlowCheckpoint) -> int | None:
    """The batch a query restarted on ``checkpoint`` runs first again: planned, not committed (or None).

    Examples:
        >>> unfinished_batch(layout.fs, layout.checkpoint("gold", "gold"))  # doctest: +SKIP
        7

    """
    def newest(folder: str) -> int:
        return max((int(name) for name in fs.list(folder) if name.isdigit()), default=-1)

    planned = newest(checkpoint.offsets)
    return planned if planned > newest(checkpoint.commits) else None


def copy_until(fs: FileSystem, source: FlowCheckpoint, target: FlowCheckpoint, last_batch: int) -> None:
    """Make ``target`` hold ``source`` as it stood when batch ``last_batch`` had committed.

    Batch-numbered entries after it are left out: the offset and commit logs, the sources' logs, and the
    state stores' versions (version ``n`` is the state after batch ``n - 1``). The copy gets a new query
    id, so Delta's streaming sink does not take its next batches for ones it already committed.

    Raises:
        ConfigError: ``source`` no longer holds that batch (Spark keeps the last
            ``spark.sql.streaming.minBatchesToRetain``), or a file source's log was compacted past it.

    """
    for log in ("offsets", "commits"):
        if not fs.exists(f"{source.path}/{log}/{last_batch}"):
            raise ConfigError(f"flow '{source.flow}' no longer keeps batch {last_batch} in its checkpoint",
                              hint="Spark keeps the last spark.sql.streaming.minBatchesToRetain batches; "
                              "rewind to a later version, or full-refresh the table")

    def keep(parts: tuple[str, ...]) -> bool:
        match = _NUMBERED.match(parts[-1])
        if match is None or parts[0] not in ("offsets", "commits", "sources", "state"):
            return parts != ("metadata",) and parts != (".metadata.crc",)
        in_store = parts[0] == "state" and len(parts) == 4 and parts[2].isdigit()  # state/op/partition/n
        return int(match.group(1)) <= last_batch + (1 if in_store else 0)

    _copy_tree(fs, source.path, target.path, (), keep)
    for name in fs.list(f"{source.path}/sources"):
        _check_source_log(fs, source, f"sources/{name}", target, last_batch)
    fs.write_text(target.metadata, json.dumps({"id": str(uuid.uuid4())}) + "\n")


def _copy_tree(fs: FileSystem, source: str, target: str, parts: tuple[str, ...],
               keep: Callable[[tuple[str, ...]], bool]) -> None:
    for name in fs.list(source):
        here = (*parts, name)
        if fs.is_dir(f"{source}/{name}"):
            _copy_tree(fs, f"{source}/{name}", f"{target}/{name}", here, keep)
        elif keep(here):
            fs.copy(f"{source}/{name}", f"{target}/{name}")


def _check_source_log(fs: FileSystem, source: FlowCheckpoint, log: str, target: FlowCheckpoint,
                      last_batch: int) -> None:
    """Refuse a copy that lost a file source's entries: its log was compacted past ``last_batch``.

    A file source logs the files of each batch (``sources/0/<batch>``, one JSON entry per file, with its
    batch id) and every few batches compacts them into ``<batch>.compact``, deleting the older entries.
    """
    def entries(root: str, keep: Callable[[int], bool]) -> set[str]:
        found = set()
        for name in fs.list(f"{root}/{log}"):
            match = _NUMBERED.match(name)
            if match is None or name.startswith(".") or not keep(int(match.group(1))):
                continue
            for line in (fs.read_text(f"{root}/{log}/{name}") or "").splitlines()[1:]:
                entry = json.loads(line)
                if isinstance(entry, dict) and "path" in entry and int(entry["batchId"]) <= last_batch:
                    found.add(str(entry["path"]))
        return found

    if not entries(source.path, lambda n: n > last_batch) <= entries(target.path, lambda n: True):
        raise ConfigError(f"flow '{source.flow}': its file source's log was compacted past batch "
                          f"{last_batch}, so it cannot go back there",
                          hint="rewind to a later version, or full-refresh the table")


def copy_own_sources(fs: FileSystem, source: FlowCheckpoint, target: FlowCheckpoint, branches: int,
                     written: int | None) -> None:
    """Make ``target`` a carrier's checkpoint ``source`` without the flows it carried: its own sources only.

    A carrier's query reads its sources once per branch (its own first), so each entry of its offset log
    has ``branches`` times its own sources' lines. The copy keeps the first share of every entry up to the
    newest batch that wrote the carrier's table (``written``: the batch its table records, None: only
    committed batches count), those batches marked committed, those sources' logs, and no state. The copy
    gets a new query id. Copying again after a crash midway gives the same checkpoint.
    """
    committed = [int(n) for n in fs.list(source.commits) if n.isdigit()]
    last = max([*committed, *([written] if written is not None else [])], default=None)
    if last is None:
        return
    own = 0
    for batch in sorted(int(n) for n in fs.list(source.offsets) if n.isdigit() and int(n) <= last):
        lines = (fs.read_text(f"{source.offsets}/{batch}") or "").splitlines()
        own = (len(lines) - 2) // max(1, branches)
        fs.write_text(f"{target.offsets}/{batch}", "\n".join(lines[:2 + own]))
        fs.write_text(f"{target.commits}/{batch}", 'v1\n{"nextBatchWatermarkMs":0}')

    def keep(parts: tuple[str, ...]) -> bool:
        match = _NUMBERED.match(parts[-1])
        return not parts[-1].endswith(".crc") and (match is None or int(match.group(1)) <= last)

    for name in fs.list(f"{source.path}/sources"):
        if name.isdigit() and int(name) < own:
            _copy_tree(fs, f"{source.path}/sources/{name}", f"{target.path}/sources/{name}", (), keep)
    fs.write_text(target.metadata, json.dumps({"id": str(uuid.uuid4())}) + "\n")


def copy_with_branches(fs: FileSystem, source: FlowCheckpoint, target: FlowCheckpoint, branches: int) -> None:
    """Make ``target`` the checkpoint of ``source``'s query carrying ``branches - 1`` more flows.

    The reverse of :func:`copy_own_sources`: each batch's offsets, up to the last committed one, list the
    query's own sources once per branch (a carried flow reads the carrier's sources from where the
    carrier stands), and so do the sources' logs; the state (the carrier's own, as carried flows keep
    none) is copied whole. The copy gets a new query id. Copying again after a crash midway gives the same
    checkpoint.
    """
    last = max(int(n) for n in fs.list(source.commits) if n.isdigit())
    own: list[str] = []
    for batch in sorted(int(n) for n in fs.list(source.offsets) if n.isdigit() and int(n) <= last):
        lines = (fs.read_text(f"{source.offsets}/{batch}") or "").splitlines()
        own = lines[2:]
        fs.write_text(f"{target.offsets}/{batch}", "\n".join(lines[:2] + own * branches))
        if fs.exists(f"{source.commits}/{batch}"):
            fs.copy(f"{source.commits}/{batch}", f"{target.commits}/{batch}")

    def keep(parts: tuple[str, ...]) -> bool:
        return not parts[-1].endswith(".crc")

    for index in range(len(own)):
        for branch in range(branches):
            if fs.is_dir(f"{source.path}/sources/{index}"):
                _copy_tree(fs, f"{source.path}/sources/{index}",
                           f"{target.path}/sources/{branch * len(own) + index}", (), keep)
    if fs.is_dir(f"{source.path}/state"):
        _copy_tree(fs, f"{source.path}/state", f"{target.path}/state", (), keep)
    fs.write_text(target.metadata, json.dumps({"id": str(uuid.uuid4())}) + "\n")
