"""``deltaflow changes``: a table's Change Data Feed between two versions, read without Spark.

Read with ``deltalake`` (no JVM), so it answers in well under a second. A table records its changes from
the version that turned ``delta.enableChangeDataFeed`` on (its creation, or the run that set the property
declared since): a ``--from`` before it is answered from that version, with a note saying so.

Examples:
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
from deltaflow.properties import CHANGE_FEED, declaration_hint

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from deltaflow.storage import StorageLayout

#: The columns the change feed adds to a table's own, shown first.
CHANGE_COLUMNS = ("_commit_version", "_change_type", "_commit_timestamp")


def table_changes(layout: StorageLayout, table: str, start: int, end: int | None = None,
                  on_message: Callable[[str], None] | None = None,
                  spec: Path | None = None) -> list[dict[str, Any]]:
    """The change rows of ``table`` from version ``start`` to ``end`` (default: the latest), in commit order.

    Within a commit: deletes, update pre- and post-images, inserts, each kind ordered by the row's values, so
    the same range reads the same however the commit's rows are spread over files. A ``start`` before the
    change feed began is moved to the version it began at, and ``on_message`` is told. ``spec``: the
    pipeline's spec file, named in the hint on declaring a change feed.

    Raises:
        ConfigError: The table does not exist, does not record its changes (the hint says how to declare
            it in the table's definition or in ``spec``), the versions are out of range or before the
            change feed began, or VACUUM has deleted their files.

    """
    import pyarrow
    from deltalake.exceptions import DeltaError

    if start < 0:
        raise ArgumentError(f"--from {start}: versions start at 0", location="changes")
    if end is not None and end < start:
        raise ArgumentError(f"--to {end} is before --from {start}", location="changes")
    delta = open_table(layout, table)
    if not _records(delta.metadata().configuration):
        spec_file = spec.name if spec is not None else "deltaflow.yml"
        declare = declaration_hint(CHANGE_FEED, "true", *_definition(layout, table), spec_file)
        raise ConfigError(f"table '{table}' does not record its changes", hint=f"declare it {declare}"
                          "; the next run sets it on the table, and changes are recorded from then on")
    latest = delta.version()
    if start < 0 or start > latest or (end is not None and not start <= end <= latest):
        asked = f"--from {start}" + ("" if end is None else f" --to {end}")
        raise ConfigError(f"{asked} is outside the versions of '{table}' (0 to {latest})")
    began = change_feed_start(layout, layout.table(table), latest, start)
    if began > start:
        if end is not None and end < began:
            raise ConfigError(f"versions {start} to {end} of '{table}' recorded no changes: its change feed "
                              f"began at version {began}", hint=f"ask from --from {began}")
        if on_message is not None:
            on_message(f"change feed from version {began} (enabled then): versions {start} to {began - 1} "
                       "recorded no changes")
        start = began
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


def change_feed_start(layout: StorageLayout, path: str, latest: int, start: int) -> int:
    """The first version from ``start`` on since which the table at ``path`` has recorded its change feed.

    Without a break up to ``latest``, which records one. Reads the log's entries from ``latest`` down,
    looking for the metadata changes among them, and stops at the first that turned the change feed off,
    or at ``start``.

    Examples:
        >>> change_feed_start(layout, layout.table("gold"), latest=5, start=0)  # doctest: +SKIP
        3

    """
    lowest_on = None  # the oldest entry seen that set metadata recording a change feed
    for version in range(latest, start - 1, -1):
        text = layout.fs.read_text(layout.commit_file_at(path, version))
        if text is None:  # cleaned up with the log's retention: reading from start says so
            return start
        recorded = _metadata_records(text)
        if recorded is False:
            assert lowest_on is not None  # the latest version records a change feed
            return lowest_on
        if recorded:
            lowest_on = version
    if lowest_on is None or lowest_on == start:  # the same metadata from start on
        return start
    # start's entry set no metadata: it kept the one before it, which the table as of start has
    return start if _records(layout.open_table(path, version=start).metadata().configuration) else lowest_on


def _metadata_records(text: str) -> bool | None:
    """Whether the log entry ``text`` sets metadata recording a change feed (None: it sets no metadata)."""
    for line in text.splitlines():
        if '"metaData"' in line and "metaData" in (action := json.loads(line)):
            return _records(action["metaData"].get("configuration") or {})
    return None


def _records(configuration: dict[str, str]) -> bool:
    settings = {k.lower(): v for k, v in configuration.items()}
    return settings.get(CHANGE_FEED.lower(), "false").lower() == "true"


def _definition(layout: StorageLayout, table: str) -> tuple[str | None, str | None]:
    """``table``'s kind and definition ``file:line``, as the last run recorded them (None: unknown)."""
    from deltaflow.observe.graph_record import read_graph_record

    for dataset in (read_graph_record(layout) or {}).get("datasets", []):
        if dataset.get("dataset") == table:
            return dataset.get("kind"), dataset.get("location")
    return None, None


def _change_order(row: dict[str, Any]) -> tuple[int, int, str]:
    values = [v for k, v in row.items() if k not in CHANGE_COLUMNS]
    return row["_commit_version"], _CHANGE_ORDER.get(row["_change_type"], 4), json.dumps(values, default=str)


_CHANGE_ORDER = {"delete": 0, "update_preimage": 1, "update_postimage": 2, "insert": 3}


def json_line(row: Any) -> str:
    """One row (or value) as a JSON line (timestamps in ISO 8601, decimals as strings)."""
    return json.dumps(row, default=_plain, ensure_ascii=False)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal | bytes):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
