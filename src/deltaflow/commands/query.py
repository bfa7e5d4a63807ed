"""``deltaflow show`` and ``deltaflow sql``: a pipeline's tables by name, queried without Spark.

delta-rs' query engine (DataFusion, through ``deltalake.QueryBuilder``) reads the tables: it applies
deletion vectors and answers in well under a second, with no JVM. A table is named as in the pipeline
(``gold_actions``); a query registers only the tables it names, so a large pipeline costs nothing extra.

Examples:
    >>> result = table_rows(layout, "silver_events", limit=5, where="amount > 10")  # doctest: +SKIP
    >>> result.columns
    ['event_id', 'user_id', 'amount']
    >>> result = run_sql(layout, "SELECT count(*) AS n FROM silver_events")  # doctest: +SKIP
    >>> result.rows
    [(4,)]

"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deltaflow.commands.tables import open_table
from deltaflow.define.graph import suggest
from deltaflow.errors import ArgumentError

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from deltaflow.storage import StorageLayout

#: A word of a query that may name a table (quoted or not).
_NAME = re.compile(r'"([^"]+)"|\b([A-Za-z_][A-Za-z0-9_]*)\b')
#: DataFusion's "not found" for a table the query names and the pipeline does not have.
_MISSING = re.compile(r"table '(?:[^.']+\.)*([^.']+)' not found")


@dataclass(frozen=True)
class QueryResult:
    """A query's answer: its column names, and its rows as Python values.

    ``more`` is True when ``show`` stopped at its limit with rows left.
    """

    columns: list[str]
    rows: list[tuple[Any, ...]]
    more: bool = False

    def as_dicts(self) -> list[dict[str, Any]]:
        """Each row as a dict by column name."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def table_rows(layout: StorageLayout, table: str, limit: int = 20, where: str | None = None,
               version: int | None = None) -> QueryResult:
    """The first ``limit`` rows (0: all) of ``table`` at ``version`` (default: latest) matching ``where``.

    Raises:
        ConfigError: No such table (naming those there are).
        ArgumentError: No such version of it, ``where`` is not a predicate over its columns (the engine's
            reason, in one line), or ``limit`` is negative.

    """
    if limit < 0:
        raise ArgumentError(f"--limit {limit}: give 0 (all rows) or more", location="show")
    delta = _open(layout, table, version)
    sql = f'SELECT * FROM "{table}"' + (f" WHERE {where}" if where else "")
    if limit:
        sql += f" LIMIT {limit + 1}"
    result = _execute({table: delta}, sql, "--where" if where else "show", layout)
    if limit and len(result.rows) > limit:
        return QueryResult(result.columns, result.rows[:limit], more=True)
    return result


def run_sql(layout: StorageLayout, query: str) -> QueryResult:
    """The answer to ``query``, a DataFusion SQL ``SELECT`` over the pipeline's tables by name.

    Raises:
        ArgumentError: The query does not parse or plan (the engine's reason and position, in one line), or
            names a table the pipeline does not have (with the tables it has).

    """
    known = set(layout.table_names())
    named = {quoted or bare for quoted, bare in _NAME.findall(query)} & known
    return _execute({name: open_table(layout, name) for name in sorted(named)}, query, "sql", layout)


def _open(layout: StorageLayout, table: str, version: int | None) -> DeltaTable:
    from deltalake.exceptions import DeltaError

    delta = open_table(layout, table)
    if version is None or version == delta.version():
        return delta
    try:
        return layout.open_table(layout.table(table), version=version)
    except DeltaError as exc:  # before the first, after the last, or cleaned from the log
        raise ArgumentError(f"--version {version}: {table} has no such version (it is at {delta.version()})",
                            location="show", hint=f"'deltaflow history {table}' lists its versions") from exc


def _execute(tables: dict[str, DeltaTable], sql: str, where: str, layout: StorageLayout) -> QueryResult:
    from deltalake import QueryBuilder
    from deltalake.exceptions import DeltaError

    builder = QueryBuilder()
    for name, delta in tables.items():
        builder.register(name, delta)
    try:
        answer = builder.execute(sql).read_all()
    except DeltaError as exc:
        raise _query_error(str(exc), sql, where, layout) from None
    columns = [answer.schema.field(i).name for i in range(len(answer.schema))]
    values = [answer.column(i).to_pylist() for i in range(len(columns))]
    return QueryResult(columns, list(zip(*values, strict=True)))


def _query_error(message: str, sql: str, where: str, layout: StorageLayout) -> ArgumentError:
    """The engine's error as one line, with where in ``sql`` it is; a missing table names those there are."""
    if missing := _MISSING.search(message):
        known = layout.table_names()
        name = missing.group(1)
        return ArgumentError(f"no table '{name}' in this pipeline{suggest(name, known)}", location=where,
                             hint="tables: " + (", ".join(known) or "none yet, run the pipeline"))
    text = " ".join(message.split())
    parsed = re.fullmatch(r'SQL error: ParserError\("(.*)"\)', text)
    if parsed:
        text = parsed.group(1).replace("found: EOF", "found the end of the query")
    elif (field := re.match(r"Schema error: No field named \"?([^\s.\"]+)", text)) and (
            at := re.search(rf"\b{re.escape(field.group(1))}\b", sql)):
        text = f"{text} (at column {at.start() + 1})"
    return ArgumentError(text, location=where)
