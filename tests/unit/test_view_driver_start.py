"""Where a recomputed view's driver query starts reading an input: its newest version that adds rows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from deltaflow.sinks.materialize import newest_data_version, removes_rows_from
from deltaflow.storage import StorageLayout


def test_the_newest_version_adding_rows_is_found_past_commits_that_add_none(tmp_path: Path) -> None:
    layout = StorageLayout(str(tmp_path))
    path = layout.table("silver")
    assert newest_data_version(layout, "silver") is None  # no table yet

    write_deltalake(path, pa.table({"id": pa.array([], pa.int64())}))  # version 0: the table, no rows
    assert newest_data_version(layout, "silver") is None
    for first in (0, 10):  # versions 1 and 2 add rows
        write_deltalake(path, pa.table({"id": list(range(first, first + 10))}), mode="append")
    DeltaTable(path).optimize.compact()  # version 3: rewrites files, adds no rows (dataChange false)
    DeltaTable(path).alter.set_table_properties({"delta.appendOnly": "false"})  # version 4: metadata only

    assert DeltaTable(path).version() == 4
    assert newest_data_version(layout, "silver") == 2
    assert newest_data_version(layout, "silver", look_back=2) is None  # only versions 4 and 3 looked at


def test_a_commit_removing_rows_from_the_start_on_is_found_and_compaction_is_not(tmp_path: Path) -> None:
    """A full refresh's overwrite, or a DELETE after the newest rows: the first batch reads them changed."""
    layout = StorageLayout(str(tmp_path))
    path = layout.table("silver")
    for first in (0, 10):  # versions 0 and 1 add rows
        write_deltalake(path, pa.table({"id": list(range(first, first + 10))}), mode="append")
    DeltaTable(path).optimize.compact()  # version 2: removes files, but no rows (dataChange false)
    assert not removes_rows_from(layout, "silver", 0)

    write_deltalake(path, pa.table({"id": [1, 2]}), mode="overwrite")  # version 3: a full refresh's swap
    assert newest_data_version(layout, "silver") == 3
    assert removes_rows_from(layout, "silver", 3) and removes_rows_from(layout, "silver", 0)
    write_deltalake(path, pa.table({"id": [3]}), mode="append")  # version 4
    assert not removes_rows_from(layout, "silver", 4)
    DeltaTable(path).delete("id = 3")  # version 5: removes rows, adds none (so not a start version)
    assert newest_data_version(layout, "silver") == 4 and removes_rows_from(layout, "silver", 4)
