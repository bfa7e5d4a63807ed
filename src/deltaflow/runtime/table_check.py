"""A table's Delta log damaged outside Delta (a bad copy, a disk error): named in one line before a run.

Delta writes each log entry whole, so a damaged one means something outside it broke the file. Before the
flows start, each table is opened with ``deltalake``; when that fails, the log files Delta reads (the
newest checkpoint and the commits after it) are checked one by one and the first damaged one is named,
with what to do. A damaged ``_last_checkpoint`` (only a hint of where the newest checkpoint is) is removed:
Delta finds the checkpoint by listing the log without it. A failure with no damaged file found is left to
Spark (deltalake may lack a feature Spark has). A table read is one that exists, which the run then need
not ask Delta to create; what it holds of its properties (:func:`deltaflow.properties.table_settings`) is
kept, so that the run sets the declared ones it lacks without reading the table again.

Examples:
    >>> sorted(check_tables(layout, ["bronze", "silver"], print))  # doctest: +SKIP
    ['bronze', 'silver']

"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from deltaflow.errors import ConfigError

if TYPE_CHECKING:
    from deltaflow.storage import FileSystem, StorageLayout

_ENTRY = re.compile(r"^(\d{20})\.(json|checkpoint\.parquet)$")


def check_tables(layout: StorageLayout, datasets: Iterable[str],
                 on_message: Callable[[str], None]) -> dict[str, dict[str, str]]:
    """Check the Delta log of each of ``datasets`` that has one; returns those read, with their properties.

    A table read is one that exists. Each repair made is passed to ``on_message``.

    Raises:
        ConfigError: A log file is damaged (see :func:`check_table_log`).

    """
    existing = {}
    for dataset in datasets:
        if layout.fs.exists(layout.delta_log(dataset)):
            settings, repairs = check_table_log(layout, dataset)
            if settings is not None:
                existing[dataset] = settings
            for repair in repairs:
                on_message(repair)
    return existing


def check_table_log(layout: StorageLayout, dataset: str) -> tuple[dict[str, str] | None, list[str]]:
    """Check ``dataset``'s Delta log: the table's properties if ``deltalake`` read it, and the repairs made.

    A repair is a removed ``_last_checkpoint``. A table read is one that exists: the run need not ask
    Delta to create it.

    Raises:
        ConfigError: A log file is damaged, naming it and what to do.

    """
    fs, log = layout.fs, layout.delta_log(dataset)
    repairs = []
    hint = fs.read_text(f"{log}/_last_checkpoint")
    if hint is not None and not _json_lines(hint):
        fs.delete(f"{log}/_last_checkpoint")
        repairs.append(f"table '{dataset}': removed its unreadable _delta_log/_last_checkpoint (a hint only; "
                       "Delta finds the checkpoint without it)")
    from deltaflow.properties import table_settings

    try:
        return table_settings(layout.open_table(layout.table(dataset))), repairs
    except Exception:  # find the damaged file, if that is what it is
        pass
    entries = sorted((int(m.group(1)), m.group(2), name) for name in fs.list(log)
                     if (m := _ENTRY.match(name)))
    checkpoints = [version for version, kind, _ in entries if kind != "json"]
    start = max(checkpoints, default=0)
    for version, kind, name in entries:
        if version < start or (kind == "json" and version == start and checkpoints):
            continue
        path = f"{log}/{name}"
        if not (_json_lines(fs.read_text(path)) if kind == "json" else _parquet(fs, path)):
            raise ConfigError(
                f"table '{dataset}': its Delta log file _delta_log/{name} is damaged, so the table cannot be "
                "read", location=path,
                hint="restore the file from a backup (Delta keeps no second copy); failing that, move the "
                f"table's folder away and rebuild it: deltaflow run --full-refresh {dataset}")
    return None, repairs


def _json_lines(text: str | None) -> bool:
    try:
        return bool(text) and all(json.loads(line) is not None for line in (text or "").splitlines() if line)
    except ValueError:
        return False


def _parquet(fs: FileSystem, path: str) -> bool:
    import pyarrow.parquet as pq

    try:
        pq.read_metadata(io.BytesIO(fs.read_bytes(path) or b""))
    except Exception:
        return False
    return True
