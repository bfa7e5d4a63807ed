"""Auto CDC into targets with deletion vectors: the key-hash filter, exactly once, read without a JVM."""

from __future__ import annotations

import json
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_model import replay, scd1, scd2
from cdc_project import COLUMNS, CUSTOMERS, forget_last_commit, graves, history, rows, run, versions
from deltaflow.commands.vacuum import vacuum_table
from deltaflow.dev.sample_data import customer_changes
from deltaflow.runtime.session import session_settings
from deltaflow.sinks import cdc, cdc_history, merge_keys
from helpers import cli

EVERY_NEW_TABLE_DV = {"spark.databricks.delta.properties.defaults.enableDeletionVectors": "true"}


def filters_taken(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[bool]:
    """Whether each MERGE of ``module`` took the key filter, which any target with deletion vectors takes
    once it holds a row (the list fills as batches run)."""
    filtered: list[bool] = []

    def condition(*args: Any, **kwargs: Any) -> Any:
        filtered.append(not isinstance(made := merge_keys.merge_condition(*args, **kwargs), str))
        return made

    monkeypatch.setattr(merge_keys, "BYTES_PER_KEY", 1)
    monkeypatch.setattr(module, "merge_condition", condition)
    return filtered


def test_a_target_with_deletion_vectors_is_merged_exactly_once_and_read_without_a_jvm(  # type: ignore[no-untyped-def]
        spark, make_project, capsys, monkeypatch) -> None:
    """Deletion vectors on for every new table, as a session may set them: MERGE marks rows instead of
    rewriting files, deltalake's query engine and change feed read the target, and the tombstone log,
    which deltalake appends to, stays without them. The second batch and its replay are small beside the
    target, so their MERGE reads only the target rows whose key hash the batch has (a wrong filter would
    turn updates into inserts: a key twice)."""
    project = make_project(CUSTOMERS.split("\ndp.create_streaming_table(\"customers_history\")")[0])
    events = customer_changes(300, 1100, seed=5, delete_share=0.2)  # the last 100 leave most rows as they are
    seen: list[dict[str, Any]] = []
    filtered = filters_taken(monkeypatch, cdc)
    with session_settings(spark, EVERY_NEW_TABLE_DV):
        for i, part in enumerate((events[:1000], events[1000:])):
            project.drop(f"{i}.json", part)
            run(spark, project)
            seen += part
            expected = sorted(scd1(seen, "customer_id", COLUMNS).values(), key=lambda r: r["customer_id"])
            assert sorted(rows(project, "customers", COLUMNS), key=lambda r: r["customer_id"]) == expected
        assert filtered == [False, True]
        target = DeltaTable(project.table("customers"))
        assert "deletionVectors" in (target.protocol().reader_features or [])
        assert target.deletion_vectors().read_all().num_rows > 0  # rows marked, their files kept
        log = DeltaTable(project.layout.checkpoint("customers", "customers", 0).tombstones)
        assert "deletionVectors" not in (log.protocol().reader_features or [])
        assert graves(project, "customers", "customers")

        # A batch replayed after its MERGE committed changes nothing.
        before = versions(project, "customers"), rows(project, "customers")
        forget_last_commit(project.checkpoint("customers", "customers"))
        run(spark, project)
        assert (versions(project, "customers"), rows(project, "customers")) == before
        assert filtered == [False, True, True]

    # `deltaflow changes` (no JVM) reads the change feed of the target, and replaying it gives the table.
    def changes(*args: str) -> subprocess.CompletedProcess[str]:
        return cli(capsys, "changes", "customers", *args, "--json", "--spec", str(project.spec_path))

    shown = changes()
    assert shown.returncode == 0, shown.stderr
    feed = [json.loads(line) for line in shown.stdout.splitlines()]
    assert {"delete", "update_postimage"} <= {r["_change_type"] for r in feed}
    assert replay(feed, "customer_id", COLUMNS) == expected

    # Upkeep: OPTIMIZE applies the marks to the files it rewrites; VACUUM then deletes the files and marks
    # no version uses, and the table reads as it did, through deltalake and Spark, and takes a new batch.
    pipeline = project.pipeline(spark)
    pipeline.optimize(["customers"])
    assert DeltaTable(project.table("customers")).deletion_vectors().read_all().num_rows == 0
    marks = set(Path(project.table("customers")).glob("deletion_vector_*.bin"))
    assert marks and vacuum_table(pipeline.resolve(), "customers", timedelta(0), stopped=True).files > 0
    assert not any(mark.exists() for mark in marks)
    assert rows(project, "customers") == before[1]
    assert spark.read.format("delta").load(project.table("customers")).count() == len(expected)
    more = customer_changes(300, 60, seed=6, start_seq=10_000)
    project.drop("2.json", more)
    run(spark, project)
    expected = sorted(scd1(seen + more, "customer_id", COLUMNS).values(), key=lambda r: r["customer_id"])
    assert sorted(rows(project, "customers", COLUMNS), key=lambda r: r["customer_id"]) == expected

    # VACUUM took the change files of the earlier versions: asking for them is one line naming the table;
    # the new batch's changes read.
    gone = changes("--from", "0")
    assert gone.returncode != 0 and "Traceback" not in gone.stderr
    assert "the changes of 'customers' from version 0" in gone.stderr and "VACUUM" in gone.stderr
    latest = changes("--from", str(versions(project, "customers")))
    assert latest.returncode == 0 and latest.stdout.strip(), latest.stderr


def test_scd2_into_a_target_with_deletion_vectors_lists_the_key_hashes_and_replays_exactly(  # type: ignore[no-untyped-def]
        spark, make_project, monkeypatch) -> None:
    """SCD type 2 into a target with deletion vectors: once the target is there, a batch's MERGE lists the
    batch's key hashes (forced on this small target), and out-of-order events and deletes still land where
    the reference model puts them (a wrong filter would leave a stale version open, or add one twice). A
    batch replayed after its MERGE committed changes nothing."""
    changes, rest = CUSTOMERS.split('\ndp.create_streaming_table("customers",')
    scd2_flow = rest[rest.index('dp.create_streaming_table("customers_history")'):].split("\n@dp.table")[0]
    project = make_project(f"{changes}\n{scd2_flow}")  # the SCD type 2 flow alone
    events = customer_changes(80, 700, seed=17, disorder=40, duplicates=0.05, delete_share=0.15)
    filtered = filters_taken(monkeypatch, cdc_history)
    seen: list[dict[str, Any]] = []
    with session_settings(spark, EVERY_NEW_TABLE_DV):
        for i, part in enumerate((events[:400], events[400:])):
            project.drop(f"{i}.json", part)
            run(spark, project)
            seen += part
            assert history(project) == scd2(seen, "customer_id", COLUMNS)
        assert filtered == [False, True]
        assert DeltaTable(project.table("customers_history")).deletion_vectors().read_all().num_rows > 0

        before = versions(project, "customers_history"), history(project)
        forget_last_commit(project.checkpoint("customers_history", "history"))
        run(spark, project)
        assert (versions(project, "customers_history"), history(project)) == before
        assert filtered == [False, True, True]
