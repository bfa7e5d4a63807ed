"""Idempotent appends and rewrites checked against the table's checksum: each batch once, stamped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from deltaflow.sinks.conflicts import retry_conflicts
from deltaflow.sinks.txn_append import append_once, recorded_version, replace_once


def _table(spark: Any, path: Path) -> str:
    spark.range(0).selectExpr("id", "CAST(id AS STRING) AS name").write.format("delta").save(str(path))
    return str(path)


def _rows(spark: Any, start: int, count: int) -> Any:
    return spark.range(start, start + count).selectExpr("id", "CAST(id AS STRING) AS name")


def _snapshot(spark: Any, path: str) -> Any:
    jvm = spark._jvm
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    return log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())


def test_a_batch_is_committed_once_and_stamped_for_every_reader(spark: Any, tmp_path: Path) -> None:
    path = _table(spark, tmp_path / "t")
    assert append_once(_rows(spark, 0, 5), path, app_id="flow-a", batch_id=0)
    assert not append_once(_rows(spark, 0, 5), path, app_id="flow-a", batch_id=0)  # the replay
    assert not append_once(_rows(spark, 100, 5), path, app_id="flow-a", batch_id=0)  # whatever it holds
    assert append_once(_rows(spark, 5, 5), path, app_id="flow-a", batch_id=1)
    assert append_once(_rows(spark, 10, 5), path, app_id="flow-b", batch_id=0)  # another flow's own count

    table = DeltaTable(path)
    ids = sorted(table.to_pyarrow_table().column("id").to_pylist())
    assert ids == list(range(15))
    assert (table.transaction_version("flow-a"), table.transaction_version("flow-b")) == (1, 0)
    history = {c["version"]: c for c in table.history()}
    assert history[1]["operation"] == "STREAMING UPDATE"
    assert int(history[1]["operationMetrics"]["numOutputRows"]) == 5
    assert int(history[1]["operationMetrics"]["numAddedFiles"]) >= 1
    assert recorded_version(_snapshot(spark, path), "flow-a") == 1  # read from the .crc
    assert recorded_version(_snapshot(spark, path), "flow-c") == -1


def test_without_a_checksum_delta_answers_and_a_replay_still_writes_nothing(
        spark: Any, tmp_path: Path) -> None:
    path = _table(spark, tmp_path / "t")
    assert append_once(_rows(spark, 0, 3), path, app_id="flow-a", batch_id=7)
    for crc in (tmp_path / "t" / "_delta_log").glob("*.crc"):  # as after a commit by another engine
        crc.unlink()
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    assert recorded_version(_snapshot(spark, path), "flow-a") is None
    assert not append_once(_rows(spark, 0, 3), path, app_id="flow-a", batch_id=7)
    assert append_once(_rows(spark, 3, 3), path, app_id="flow-a", batch_id=8)
    assert sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist()) == list(range(6))


def test_rows_that_do_not_fit_the_table_go_through_delta_s_writer_still_once(
        spark: Any, tmp_path: Path) -> None:
    path = _table(spark, tmp_path / "t")
    narrower = spark.range(2).selectExpr("id")  # Delta's writer fills the missing column with nulls
    assert append_once(narrower, path, app_id="flow-a", batch_id=0)
    assert append_once(narrower, path, app_id="flow-a", batch_id=0)  # Delta skips it, without saying
    table = DeltaTable(path)
    assert table.to_pyarrow_table().column("name").to_pylist() == [None, None]
    assert table.transaction_version("flow-a") == 0
    assert table.history(1)[0]["operation"] == "WRITE"  # Delta's writer's commit, not ours


def _bumped(spark: Any, files: list[str]) -> Any:
    """The rows in ``files``, each ``name`` with a ``+`` more: what a rewrite keeps, changed."""
    return spark.read.parquet(*files).selectExpr("id", "name || '+' AS name")


def test_a_rewrite_reads_the_current_files_replaces_them_and_commits_once(spark: Any, tmp_path: Path) -> None:
    path = _table(spark, tmp_path / "t")
    _rows(spark, 0, 4).repartition(2).write.format("delta").mode("append").save(path)
    read: list[int] = []

    def rows(files: list[str]) -> Any:
        read.append(len(files))
        return _bumped(spark, files)

    assert replace_once(spark, path, rows, app_id="view", batch_id=3)
    assert not replace_once(spark, path, rows, app_id="view", batch_id=3)  # the replay: nothing read
    assert replace_once(spark, path, rows, app_id="view", batch_id=4)
    table = DeltaTable(path)
    assert sorted(table.to_pyarrow_table().column("name").to_pylist()) == [f"{i}++" for i in range(4)]
    assert read == [2, len(table.file_uris())] and table.transaction_version("view") == 4
    last = table.history(1)[0]
    assert (last["operation"], last["operationParameters"]["mode"]) == ("WRITE", "Overwrite")
    assert int(last["operationMetrics"]["numRemovedFiles"]) == read[1]


def test_a_rewrite_that_loses_to_a_compaction_runs_again_on_its_files(spark: Any, tmp_path: Path) -> None:
    path = _table(spark, tmp_path / "t")
    _rows(spark, 0, 6).repartition(3).write.format("delta").mode("append").save(path)
    read: list[int] = []

    def rows(files: list[str]) -> Any:
        read.append(len(files))
        if len(read) == 1:  # a compaction commits while the batch is being written
            spark.sql(f"OPTIMIZE delta.`{path}`").collect()
        return _bumped(spark, files)

    assert retry_conflicts(lambda: replace_once(spark, path, rows, app_id="view", batch_id=0), "view")
    assert read == [3, 1]  # the second attempt read the compacted file
    names = sorted(DeltaTable(path).to_pyarrow_table().column("name").to_pylist())
    assert names == sorted(f"{i}+" for i in range(6))  # each row once, changed once


def test_a_rewrite_the_checksum_cannot_list_writes_nothing(spark: Any, tmp_path: Path) -> None:
    path = _table(spark, tmp_path / "t")
    assert append_once(_rows(spark, 0, 3), path, app_id="view", batch_id=0)
    for crc in (tmp_path / "t" / "_delta_log").glob("*.crc"):  # as after a commit by another engine
        crc.unlink()
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    assert replace_once(spark, path, lambda files: _bumped(spark, files), app_id="view", batch_id=1) is None
    assert sorted(DeltaTable(path).to_pyarrow_table().column("name").to_pylist()) == ["0", "1", "2"]
