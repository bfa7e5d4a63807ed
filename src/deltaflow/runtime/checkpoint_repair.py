"""A flow's checkpoint damaged by a crash or a bad copy: repaired when that is provably safe, else one line.

Spark resumes a query from the newest entries of its offset and commit logs and its ``metadata`` (the query
id, which names its writes in the tables). Before a flow starts, :func:`repair_checkpoint` reads them:

* **the newest ``commits/N`` is unreadable**: batch N wrote its tables, then its commit entry was damaged.
  The entry is removed: batch N runs again with its recorded offsets and Delta skips its writes (they carry
  the flow's id and N). Repaired.
* **the newest ``offsets/N`` is unreadable and batch N has no commit**: if no table holds a write of batch
  N (Delta's transaction record for the flow), batch N never wrote anything and the entry is removed: the
  batch is planned again. Otherwise, or when batch N had committed, the offsets cannot be known again:
  an error naming the file.
* **``metadata`` is missing** while batches were logged: the query id is found again (one the event log
  saw run the flow, whose writes the table's transaction record holds) and the file written back;
  otherwise an error naming the file.

Examples:
    >>> repair_checkpoint(layout, checkpoint, layout.table("silver"))  # doctest: +SKIP
    ["flow 'silver': removed the unreadable commits/7; batch 7 runs again and Delta skips what it wrote"]

"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from deltaflow.errors import ConfigError

if TYPE_CHECKING:
    from deltaflow.storage import FlowCheckpoint, StorageLayout

_VERSION = re.compile(r"^v\d+$")


def readable(text: str | None, lines_after_version: int) -> bool:
    r"""Whether a log entry is whole: a version line, then at least so many lines, each ``-`` or JSON.

    Examples:
        >>> readable('v1\n{"a": 1}', 1), readable('v1\n{"a": ', 1), readable("garbage", 1)
        (True, False, False)

    """
    lines = (text or "").splitlines()
    if not lines or not _VERSION.match(lines[0]) or len(lines) < 1 + lines_after_version:
        return False
    try:
        for line in lines[1:]:
            if line.strip() != "-":
                json.loads(line)
    except ValueError:
        return False
    return True


def repair_checkpoint(layout: StorageLayout, checkpoint: FlowCheckpoint, table: str | None) -> list[str]:
    """Check ``checkpoint`` (of a flow writing the Delta table at ``table``); repair it when safe.

    ``table`` None (a foreach-batch sink's flow, writing what its function wants) means nothing is known
    of its writes: only the commit entry is repaired.

    Returns:
        One line per repair made.

    Raises:
        ConfigError: Damage that cannot be repaired safely, naming the file and what to do.

    """
    fs = layout.fs
    offsets = sorted(int(n) for n in fs.list(checkpoint.offsets) if n.isdigit())
    commits = sorted(int(n) for n in fs.list(checkpoint.commits) if n.isdigit())
    if not offsets and not commits:
        return []
    flow = f"flow '{checkpoint.flow}'"
    refresh = ("restore it from a backup, or rebuild the flow: deltaflow run --full-refresh "
               f"{checkpoint.dataset}")
    repairs = []
    query_id = _query_id(layout, checkpoint, table)
    if query_id is None:
        raise ConfigError(f"{flow}: its checkpoint lost its metadata file (the query id its writes carry)",
                          location=checkpoint.metadata, hint=refresh)
    if commits and not readable(fs.read_text(f"{checkpoint.commits}/{commits[-1]}"), 1):
        _remove(layout, checkpoint.commits, commits[-1])
        repairs.append(f"{flow}: removed the unreadable commits/{commits[-1]}; batch {commits[-1]} runs "
                       "again and Delta skips what it wrote")
        commits.pop()
    if offsets and not readable(fs.read_text(f"{checkpoint.offsets}/{offsets[-1]}"), 2):
        batch = offsets[-1]
        written = written_batch(layout, table, [query_id, checkpoint.app_id(query_id)]) if table else batch
        if (commits and commits[-1] >= batch) or (written is not None and written >= batch):
            raise ConfigError(f"{flow}: its checkpoint entry offsets/{batch} is unreadable and batch {batch} "
                              "already wrote its table, so what it read cannot be known again",
                              location=f"{checkpoint.offsets}/{batch}", hint=refresh)
        _remove(layout, checkpoint.offsets, batch)
        repairs.append(f"{flow}: removed the unreadable offsets/{batch}; batch {batch} had written nothing "
                       "and is planned again")
    return repairs


def _query_id(layout: StorageLayout, checkpoint: FlowCheckpoint, table: str | None) -> str | None:
    """The query id in ``metadata``; else (written back) one the event log saw and the table's record names.

    The event log has the id of every query that ran the flow; the one whose writes the table records (as
    the id itself, Delta's sink, or in the flow's app id, deltaflow's) is this checkpoint's.
    """
    if layout.fs.exists(checkpoint.metadata):
        return layout.query_id(checkpoint)
    from deltaflow.commands.tables import query_rows

    try:
        logged = query_rows(layout.open_table(layout.event_log), ["query_id", "end_time"],
                            {"flow": checkpoint.flow, "kind": "batch"})
    except Exception:  # no event log
        return None
    if table is None:
        return None
    for query_id in dict.fromkeys(r["query_id"] for r in sorted(logged, key=lambda r: r["end_time"],
                                                                 reverse=True)):
        if written_batch(layout, table, [query_id, checkpoint.app_id(query_id)]) is not None:
            layout.fs.write_text(checkpoint.metadata, json.dumps({"id": query_id}) + "\n")
            return str(query_id)
    return None


def written_batch(layout: StorageLayout, table: str, app_ids: list[str]) -> int | None:
    """The newest batch id the Delta table at ``table`` records for any of ``app_ids`` (None: none)."""
    try:
        log = layout.open_table(table)
    except Exception:
        return None
    versions = [v for a in app_ids if (v := log.transaction_version(a)) is not None]
    return max(versions) if versions else None


def _remove(layout: StorageLayout, folder: str, batch: int) -> None:
    layout.fs.delete(f"{folder}/{batch}")
    layout.fs.delete(f"{folder}/.{batch}.crc")  # the local filesystem's checksum of the entry
