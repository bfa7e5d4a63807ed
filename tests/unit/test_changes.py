"""`deltaflow changes` reads a table's change feed without Spark, in one order however the rows are stored."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from deltaflow.commands.changes import table_changes
from deltaflow.storage import StorageLayout


def test_a_commits_changes_come_in_the_same_order_from_any_start(tmp_path: Path) -> None:
    layout = StorageLayout(str(tmp_path))
    path = layout.table("customers")
    write_deltalake(path, pa.table({"id": ["c3", "c1"], "tier": ["gold", "silver"]}),
                    partition_by=["tier"], configuration={"delta.enableChangeDataFeed": "true"})
    # one commit, a file per row (a partition each), the rows out of order
    write_deltalake(path, pa.table({"id": ["c9", "c2", "c7", "c4"], "tier": ["a", "b", "c", "d"]}),
                    mode="append")
    DeltaTable(path).delete("id = 'c3' OR id = 'c7'")

    def changes(start: int) -> list[tuple[int, str, str]]:
        return [(r["_commit_version"], r["_change_type"], r["id"]) for r in table_changes(layout, "customers",
                                                                                          start)]

    assert changes(0) == [(0, "insert", "c1"), (0, "insert", "c3"),
                          (1, "insert", "c2"), (1, "insert", "c4"), (1, "insert", "c7"), (1, "insert", "c9"),
                          (2, "delete", "c3"), (2, "delete", "c7")]
    assert changes(1) == changes(0)[2:]
