"""Opening a pipeline's tables without Spark, with one error for a table that is not there.

Examples:
    >>> delta = open_table(layout, "customers")  # doctest: +SKIP
    >>> delta.version()
    4

"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from deltaflow.define.graph import suggest
from deltaflow.errors import ConfigError

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from deltaflow.storage import StorageLayout


def open_table(layout: StorageLayout, table: str) -> DeltaTable:
    """``table``'s Delta table, read with ``deltalake``.

    Raises:
        ConfigError: No such table (yet), naming the tables there are.

    """
    from deltalake.exceptions import TableNotFoundError

    try:
        return layout.open_table(layout.table(table))
    except TableNotFoundError:
        known = layout.table_names()
        raise ConfigError(f"no table '{table}' in {layout.tables}{suggest(table, known)}",
                          hint="tables: " + (", ".join(known) or "none yet, run the pipeline")) from None


def query_rows(delta: DeltaTable, columns: Sequence[str], where: Mapping[str, str] | None = None,
               ) -> list[dict[str, Any]]:
    """``columns`` of the rows of ``delta`` whose columns equal ``where``'s values, as dicts.

    deltalake's own query engine reads them (it applies deletion vectors, which ``to_pyarrow_table``
    refuses), and its Arrow result converts itself to Python values: no ``pyarrow.dataset`` and no pandas
    is imported, which is most of a JVM-free command's start otherwise.

    Examples:
        >>> query_rows(delta, ["flow", "kind"], {"pipeline": "orders"})  # doctest: +SKIP
        [{'flow': 'bronze', 'kind': 'batch'}, ...]

    """
    from deltalake import QueryBuilder

    def quoted(value: str) -> str:
        return "'" + value.replace("'", "''") + "'"

    sql = "SELECT " + ", ".join(f'"{c}"' for c in columns) + " FROM t"
    if where:
        sql += " WHERE " + " AND ".join(f'"{c}" = {quoted(v)}' for c, v in where.items())
    result = QueryBuilder().register("t", delta).execute(sql).read_all()
    values = [result.column(c).to_pylist() for c in columns]
    return [dict(zip(columns, row, strict=True)) for row in zip(*values, strict=True)]
