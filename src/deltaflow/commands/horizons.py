"""How long a stopped flow can stay stopped: the horizons of the tables it streams, read without Spark.

A flow restarts from the table version its checkpoint holds (:mod:`deltaflow.commands.readers`). Two
clocks run against it while it is stopped:

- **the log retention** (``delta.logRetentionDuration``, Delta's default 30 days): writers drop older log
  entries at their checkpoints, on their own. Past it, the flow cannot restart without a full refresh
  (``DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE``).
- **the file retention** (``delta.deletedFileRetentionDuration``, 7 days): past it, ``deltaflow vacuum``
  keeps the files the flow needs by refusing to run with that retention, so the flow holds back cleanup.

``status`` shows one warning per flow and table once either is near (:data:`NEAR` of it used up).

Examples:
    >>> retention_warnings(layout)  # doctest: +SKIP
    {'silver': ["reads 'bronze' from version 12, 26d old: the table's log keeps 30d; run it within 4d ..."]}

"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from deltaflow.commands.readers import stream_positions
from deltaflow.commands.tables import open_table
from deltaflow.spec.durations import human, parse_duration

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from deltaflow.storage import StorageLayout

NEAR = 0.75
LOG_RETENTION = ("delta.logRetentionDuration", timedelta(days=30))
FILE_RETENTION = ("delta.deletedFileRetentionDuration", timedelta(days=7))


def table_retention(delta: DeltaTable, setting: tuple[str, timedelta]) -> timedelta:
    """A retention of ``delta`` (:data:`LOG_RETENTION` or :data:`FILE_RETENTION`), by default Delta's."""
    configured = delta.metadata().configuration.get(setting[0])
    return parse_duration(configured) if configured else setting[1]


def retention_warnings(layout: StorageLayout, flows: Collection[str], now: datetime | None = None,
                       ) -> dict[str, list[str]]:
    """One line per (flow, table) for each of ``flows`` whose restart point nears a table's horizon."""
    warnings: dict[str, list[str]] = {}
    tables = {table: open_table(layout, table) for table in layout.table_names()}
    positions = stream_positions(layout, tables, flows)
    for table, delta in tables.items():
        keep_log, keep_files = table_retention(delta, LOG_RETENTION), table_retention(delta, FILE_RETENTION)
        latest = delta.version()
        for position in positions[table]:
            if position.version > latest:  # caught up: it reads the version still to come
                continue
            age = position.age(now)
            old = f"{human(age, up=False)} old" if age is not None else ""
            where = f"reads '{table}' from version {position.version}"
            refresh = f"deltaflow run --full-refresh {position.dataset}"
            if age is None:
                line = f"{where}, which the table's log no longer holds: it needs {refresh}"
            elif age >= keep_log * NEAR:
                left = human(max(keep_log - age, timedelta(0)), up=False)
                line = (f"{where}, {old}: the table's log keeps {human(keep_log)}; run it within {left} "
                        f"or it will need {refresh}")
            elif age >= keep_files * NEAR:
                line = (f"{where}, {old}: past {human(keep_files)} (the table's file retention) it holds "
                        f"back deltaflow vacuum of '{table}'; run it")
            else:
                continue
            warnings.setdefault(position.flow, []).append(line)
    return warnings
