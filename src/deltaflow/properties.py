"""Declared Delta table properties against a table's own: what a run must set, and how to declare one.

A table's properties are declared in ``deltaflow.yml`` (``table_properties``, for every table) and in its
definition (``@dp.table(table_properties=...)``, ``TBLPROPERTIES`` in SQL; a table's own win). A run sets
on each existing table the declared properties it lacks or holds with another value, in one
``SET TBLPROPERTIES`` commit, and commits nothing when they all hold. A property no longer declared stays on
the table: nothing here removes one (``ALTER TABLE ... UNSET TBLPROPERTIES`` does, by hand).

Protocol properties (``delta.minReaderVersion``, ``delta.minWriterVersion``, ``delta.feature.*``) are not
in a table's configuration: they hold when the table's protocol has them (see :func:`table_settings`).

Examples:
    >>> to_set({"delta.enableChangeDataFeed": "true", "delta.appendOnly": "false"},
    ...        {"delta.appendonly": "FALSE"})
    {'delta.enableChangeDataFeed': 'true'}

"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deltalake import DeltaTable

#: The property that makes a table record its Change Data Feed.
CHANGE_FEED = "delta.enableChangeDataFeed"
_VERSIONS = ("delta.minreaderversion", "delta.minwriterversion")
_FEATURE = "delta.feature."


def table_settings(delta: DeltaTable) -> dict[str, str]:
    """``delta``'s configuration, with its protocol spelled as the properties that ask for it.

    Examples:
        >>> table_settings(layout.open_table(layout.table("bronze")))  # doctest: +SKIP
        {'delta.minReaderVersion': '1', 'delta.minWriterVersion': '2'}

    """
    protocol = delta.protocol()
    settings = {"delta.minReaderVersion": str(protocol.min_reader_version),
                "delta.minWriterVersion": str(protocol.min_writer_version)}
    for feature in {*(protocol.reader_features or ()), *(protocol.writer_features or ())}:
        settings[f"{_FEATURE}{feature}"] = "supported"
    return {**settings, **delta.metadata().configuration}


def to_set(declared: Mapping[str, str], settings: Mapping[str, str]) -> dict[str, str]:
    """The ``declared`` properties that the table (its ``settings``) does not hold as declared.

    Delta spells a ``delta.*`` key its own way whatever case it was given in, and keeps ``true``/``false``
    as given, so those compare without case; a protocol version holds when the table's is at least it.
    """
    held = {_key(k): v for k, v in settings.items()}
    return {key: value for key, value in declared.items() if not _holds(_key(key), value, held)}


def _key(key: str) -> str:
    return key.lower() if key.lower().startswith("delta.") else key


def _holds(key: str, value: str, held: Mapping[str, str]) -> bool:
    if key not in held:
        return False
    have = held[key]
    if key in _VERSIONS and have.isdigit() and value.strip().isdigit():
        return int(have) >= int(value)
    if key.startswith(_FEATURE):
        return True  # a feature, once supported, stays supported
    if {have.lower(), value.lower()} <= {"true", "false"}:
        return have.lower() == value.lower()
    return have == value


def declaration_hint(key: str, value: str, kind: str | None, location: str | None,
                     spec_file: str = "deltaflow.yml") -> str:
    """How to declare table property ``key``: on the table where it is defined, or in ``spec_file``.

    ``kind`` and ``location`` (``file:line``) are the table's, as the last run recorded them (None when
    unknown). The definition's form is that of its language (Python or SQL); the spec's is YAML (one line,
    as errors are: ``table_properties: {key: "value"}``, a key beside any already under it).

    Examples:
        >>> print(declaration_hint(CHANGE_FEED, "true", "materialized_view", "t/p.py:4"))
        in t/p.py:4: @dp.materialized_view(table_properties={"delta.enableChangeDataFeed": "true"}), or for \
every table, in deltaflow.yml: table_properties: {delta.enableChangeDataFeed: "true"}

    """
    where = f"in {location}: " if location else "in its definition: "
    if location and Path(location.rsplit(":", 1)[0]).suffix == ".sql":
        own = f"TBLPROPERTIES ('{key}' = '{value}')"
    else:
        decorator = {"materialized_view": "@dp.materialized_view"}.get(kind or "", "@dp.table")
        own = f'{decorator}(table_properties={{"{key}": "{value}"}})'
    return f'{where}{own}, or for every table, in {spec_file}: table_properties: {{{key}: "{value}"}}'
