"""``deltaflow changes``: a table's Change Data Feed between two versions, read without Spark.

Read with ``deltalake`` (no JVM), so it answers in well under a second.

Example:
    >>> changes = table_changes(layout, "customers", start=1, end=3)  # doctest: +SKIP
    >>> changes[0]["_change_type"]
    'insert'

"""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from deltaflow.commands.tables import open_table
from deltaflow.errors import ArgumentError, ConfigError

if TYPE_CHECKING:
    from deltaflow.storage import StorageLayout

#: The columns the change feed adds to a table's own, shown first.
CHANGE_COLUMNS = ("_commit_version", "_change_type", "_commit_timestamp")


def table_changes(layout: StorageLayout, table: str, start: int,
                  end: int | None = None) -> list[dict[str, Any]]:
    """The change rows of ``table`` from version ``start`` to ``end`` (default: the latest), in commit order.

    Within a commit: deletes, update pre- and post-images, inserts, each kind ordered by the row's values, so
    the same range reads the same however the commit's rows are spread over files.

    Raises:
        ConfigError: The table does not exist, does not record its changes, the versions are out of range,
            or VACUUM has deleted their files.

    """
    import pyarrow
    from deltalake.exceptions import DeltaError

    if start < 0:
        raise ArgumentError(f"--from {start}: versions start at 0", location="changes")
    if end is not None and end < start:
        raise ArgumentError(f"--to {end} is before --from {start}", location="changes")
    delta = open_table(layout, table)
    configuration = delta.metadata().configuration
    if configuration.get("delta.enableChangeDataFeed", "false").lower() != "true":
        raise ConfigError(f"table '{table}' does not record its changes",
                          hint="set table_properties={'delta.enableChangeDataFeed': 'true'} on it or in "
                          "deltaflow.yml; changes are recorded from then on")
    latest = delta.version()
    if start < 0 or start > latest or (end is not None and not start <= end <= latest):
        asked = f"--from {start}" + ("" if end is None else f" --to {end}")
        raise ConfigError(f"{asked} is outside the versions of '{table}' (0 to {latest})")
    try:
        rows = pyarrow.table(delta.load_cdf(starting_version=start, ending_version=end)).to_pylist()
    except DeltaError as exc:
        raise ConfigError(f"cannot read the changes of '{table}': {exc}") from None
    except pyarrow.ArrowInvalid as exc:  # a file the log names is gone: read as the rows stream in
        if "not found" not in str(exc):
            raise
        raise ConfigError(f"cannot read the changes of '{table}' from version {start}: a file they are in "
                          "is gone", hint="VACUUM deletes the files of versions older than its "
                          "retention; ask for later versions (--from)") from None
    ordered = [{**{c: row[c] for c in CHANGE_COLUMNS}, **{k: v for k, v in row.items()
                                                          if k not in CHANGE_COLUMNS}} for row in rows]
    return sorted(ordered, key=_change_order)


def _change_order(row: dict[str, Any]) -> tuple[int, int, str]:
    values = [v for k, v in row.items() if k not in CHANGE_COLUMNS]
    return row["_commit_version"], _CHANGE_ORDER.get(row["_change_type"], 4), json.dumps(values, default=str)


_CHANGE_ORDER = {"delete": 0, "update_preimage": 1, "update_postimage": 2, "insert": 3}


def json_line(row: dict[str, Any]) -> str:
    """One change row as a JSON line (timestamps in ISO 8601, decimals as strings)."""
    return json.dumps(row, default=_plain, ensure_ascii=False)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal | bytes):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
