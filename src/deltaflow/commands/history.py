"""``deltaflow history``: a table's versions, newest first, each with the flow and micro-batch that wrote it.

Read from the table's Delta log without Spark. The writer comes from the transaction id deltaflow stamps
on every write (:meth:`~deltaflow.storage.layout.FlowCheckpoint.app_id`), or, for a plain streaming
append, from Delta's own ``(query id, batch id)`` matched against the flows' checkpoints.

Examples:
    >>> versions = table_history(layout, "customers", limit=5)  # doctest: +SKIP
    >>> versions[0].operation, versions[0].flow, versions[0].batch_id
    ('MERGE', 'customers', 41)

"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from deltaflow.commands.tables import open_table
from deltaflow.storage.layout import FlowCheckpoint

if TYPE_CHECKING:
    from deltaflow.storage import StorageLayout

#: Operations whose ``numOutputRows`` are rows the commit added (for MERGE they include copied rows).
_APPENDS = {"WRITE", "STREAMING UPDATE", "CREATE TABLE AS SELECT", "REPLACE TABLE AS SELECT",
            "CREATE OR REPLACE TABLE AS SELECT"}


@dataclass(frozen=True)
class TableVersion:
    """One commit of a table: what it did and who wrote it.

    ``flow``, ``generation`` and ``batch_id`` are set when a deltaflow flow wrote it; ``writer`` says who
    in words (``flow 'silver' batch 12``, ``quarantine replay``, or empty: a command outside the run, such
    as OPTIMIZE or the table's creation).
    """

    version: int
    timestamp: datetime
    operation: str
    rows_inserted: int | None
    rows_updated: int | None
    rows_deleted: int | None
    files_added: int
    files_removed: int
    flow: str | None
    generation: int | None
    batch_id: int | None
    writer: str

    def as_json(self) -> dict[str, Any]:
        """The version as a JSON-ready dict (the timestamp in ISO 8601)."""
        return {**asdict(self), "timestamp": self.timestamp.isoformat()}


def table_history(layout: StorageLayout, table: str, limit: int = 20) -> list[TableVersion]:
    """The newest ``limit`` versions of ``table`` (0: all the log still holds), newest first.

    Raises:
        ConfigError: No such table.

    """
    queries = {layout.query_id(c): c for c in layout.flow_checkpoints(table)}
    return log_history(layout, layout.table(table), open_table(layout, table).version(), queries, limit)


def log_history(layout: StorageLayout, path: str, latest: int, queries: dict[str, FlowCheckpoint],
                limit: int = 0) -> list[TableVersion]:
    """The newest ``limit`` versions (0: all) of the Delta table at ``path`` from ``latest`` down.

    ``queries`` maps the query ids of the flows that stream into the table to their checkpoints.
    """
    found: list[TableVersion] = []
    version = latest
    while version >= 0 and (limit <= 0 or len(found) < limit):
        text = layout.fs.read_text(layout.commit_file_at(path, version))
        if text is None:  # older commits were cleaned up with the log's retention
            break
        found.append(_version(version, [json.loads(line) for line in text.splitlines() if line], queries))
        version -= 1
    return found


def _version(version: int, actions: list[dict[str, Any]], queries: dict[str, FlowCheckpoint]) -> TableVersion:
    info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
    operation = str(info.get("operation", "?"))
    metrics = info.get("operationMetrics") or {}

    def metric(*names: str) -> int | None:
        return next((int(metrics[n]) for n in names if n in metrics), None)

    inserted = (metric("numTargetRowsInserted") if operation == "MERGE"
                else metric("numOutputRows") if operation in _APPENDS else None)
    flow, generation, batch, writer = _writer(actions, info, queries)
    return TableVersion(
        version=version, timestamp=datetime.fromtimestamp(int(info.get("timestamp", 0)) / 1000, UTC),
        operation=operation, rows_inserted=inserted,
        rows_updated=metric("numTargetRowsUpdated", "numUpdatedRows"),
        rows_deleted=metric("numTargetRowsDeleted", "numDeletedRows"),
        files_added=sum(1 for a in actions if "add" in a),
        files_removed=sum(1 for a in actions if "remove" in a),
        flow=flow, generation=generation, batch_id=batch, writer=writer,
    )


def _writer(actions: list[dict[str, Any]], info: dict[str, Any],
            queries: dict[str, FlowCheckpoint]) -> tuple[str | None, int | None, int | None, str]:
    """``(flow, generation, batch id, in words)`` of the commit's writer."""
    for txn in (a["txn"] for a in actions if "txn" in a):
        app_id, batch = str(txn["appId"]), int(txn["version"])
        if (identity := FlowCheckpoint.of_app_id(app_id)) is not None:
            _, flow, generation = identity
            return flow, generation, batch, f"flow '{flow}' batch {batch}"
        if app_id.startswith("deltaflow:replay/"):
            return None, None, None, "quarantine replay"
        if (checkpoint := queries.get(app_id)) is not None:  # Delta's streaming sink: (query id, batch id)
            return checkpoint.flow, checkpoint.generation, batch, f"flow '{checkpoint.flow}' batch {batch}"
    query = (info.get("operationParameters") or {}).get("queryId")
    if query is not None and (checkpoint := queries.get(str(query))) is not None:
        batch = int(info["operationParameters"].get("epochId", -1))
        return checkpoint.flow, checkpoint.generation, batch, f"flow '{checkpoint.flow}' batch {batch}"
    return None, None, None, ""
