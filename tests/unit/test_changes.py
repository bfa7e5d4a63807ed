"""`deltaflow changes` reads a table's change feed without Spark, in one order however the rows are stored."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable, write_deltalake

from deltaflow.commands.changes import table_changes
from deltaflow.errors import ConfigError
from deltaflow.properties import to_set
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


def test_changes_are_read_from_the_version_the_change_feed_began(tmp_path: Path) -> None:
    layout = StorageLayout(str(tmp_path))
    path = layout.table("gold")
    write_deltalake(path, pa.table({"id": ["a"]}))
    write_deltalake(path, pa.table({"id": ["b"]}), mode="append")
    DeltaTable(path).alter.set_table_properties({"delta.enableChangeDataFeed": "true"})  # version 2
    write_deltalake(path, pa.table({"id": ["c"]}), mode="append")
    notes: list[str] = []

    rows = table_changes(layout, "gold", 0, on_message=notes.append)
    assert [(r["_commit_version"], r["_change_type"], r["id"]) for r in rows] == [(3, "insert", "c")]
    assert notes == ["change feed from version 2 (enabled then): versions 0 to 1 recorded no changes"]
    notes.clear()
    assert table_changes(layout, "gold", 3, on_message=notes.append) == rows and notes == []
    with pytest.raises(ConfigError, match=r"versions 0 to 1 of 'gold' recorded no changes: its change feed "
                       r"began at version 2 \(ask from --from 2\)"):
        table_changes(layout, "gold", 0, 1)

    # turned off, then on again: only the changes since it was last turned on
    DeltaTable(path).alter.set_table_properties({"delta.enableChangeDataFeed": "false"})  # 4
    write_deltalake(path, pa.table({"id": ["d"]}), mode="append")  # 5
    DeltaTable(path).alter.set_table_properties({"delta.enableChangeDataFeed": "true"})  # 6
    write_deltalake(path, pa.table({"id": ["e"]}), mode="append")  # 7
    rows = table_changes(layout, "gold", 1, on_message=notes.append)
    assert [(r["_commit_version"], r["id"]) for r in rows] == [(7, "e")]
    assert notes == ["change feed from version 6 (enabled then): versions 1 to 5 recorded no changes"]


def test_a_table_without_a_change_feed_is_told_how_to_declare_one_where_it_is_defined(tmp_path: Path) -> None:
    layout = StorageLayout(str(tmp_path))
    write_deltalake(layout.table("gold_actions"), pa.table({"action": ["buy"]}))
    with pytest.raises(ConfigError) as raised:
        table_changes(layout, "gold_actions", 0)
    hint = raised.value.hint or ""
    # no run recorded the definition: both forms, the spec's in YAML as deltaflow.yml spells it
    assert 'in its definition: @dp.table(table_properties={"delta.enableChangeDataFeed": "true"})' in hint
    yaml_form = hint.split("in deltaflow.yml: ", 1)[1].split(";")[0]
    assert yaml_form == 'table_properties: {delta.enableChangeDataFeed: "true"}'
    assert yaml.safe_load(yaml_form) == {"table_properties": {"delta.enableChangeDataFeed": "true"}}
    assert "'delta.enableChangeDataFeed': 'true'" not in str(raised.value)  # no Python dict for the YAML

    layout.fs.write_text(layout.graph_record, json.dumps({"datasets": [
        {"dataset": "gold_actions", "kind": "materialized_view", "location": "transformations/p.py:41"}]}))
    with pytest.raises(ConfigError, match=r'in transformations/p.py:41: @dp.materialized_view\('
                       r'table_properties=\{"delta.enableChangeDataFeed": "true"\}\), or for every table, in '
                       r'deltaflow.yml'):
        table_changes(layout, "gold_actions", 0)
    layout.fs.write_text(layout.graph_record, json.dumps({"datasets": [
        {"dataset": "gold_actions", "kind": "materialized_view", "location": "transformations/g.sql:3"}]}))
    with pytest.raises(ConfigError, match=r"in transformations/g.sql:3: TBLPROPERTIES \("
                       r"'delta.enableChangeDataFeed' = 'true'\), or for every table, in spark-pipeline.yml"):
        table_changes(layout, "gold_actions", 0, spec=tmp_path / "spark-pipeline.yml")


def test_declared_properties_a_table_holds_are_not_set_again() -> None:
    kept = {"delta.feature.deletionVectors": "supported", "delta.logRetentionDuration": "interval 30 days"}
    held = {"delta.enablechangedatafeed": "TRUE", "delta.minWriterVersion": "7", **kept}
    declared = {"delta.enableChangeDataFeed": "true", "delta.minWriterVersion": "4", **kept}
    assert to_set(declared, held) == {}
    assert to_set({**declared, "delta.logRetentionDuration": "interval 7 days", "owner": "me"}, held) == {
        "delta.logRetentionDuration": "interval 7 days", "owner": "me"}
