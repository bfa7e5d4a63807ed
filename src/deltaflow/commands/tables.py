"""Opening a pipeline's tables without Spark, with one error for a table that is not there.

Example:
    >>> delta = open_table(layout, "customers")  # doctest: +SKIP
    >>> delta.version()
    4

"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deltaflow.errors import ConfigError
from deltaflow.graph import suggest

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
