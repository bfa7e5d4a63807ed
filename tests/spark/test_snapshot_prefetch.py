"""A Delta table's next snapshot computed in the background after a commit (auto CDC's MERGE target)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from deltaflow.pipeline import Pipeline
from deltaflow.sinks.snapshot_prefetch import loaded_snapshot, prefetch
from deltaflow.spec import load_spec
from helpers import AUTO_CDC


def test_prefetch_computes_the_snapshot_a_commit_left(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "table")
    spark.range(10).write.format("delta").save(path)
    spark.range(5).write.format("delta").mode("append").save(path)
    before = loaded_snapshot(spark, path)
    assert before.version() == 1 and not before.stateReconstructionTriggered()

    prefetch(spark, path).result(timeout=120)
    after = loaded_snapshot(spark, path)
    assert after.version() == 1 and after.stateReconstructionTriggered()


def test_a_failed_prefetch_is_contained(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Exception, match=r"(?i)not a delta table"):
        prefetch(spark, str(tmp_path / "nothing")).result(timeout=120)
    table = str(tmp_path / "table")
    spark.range(3).write.format("delta").save(table)
    prefetch(spark, table).result(timeout=120)  # the thread goes on


def test_an_auto_cdc_batch_leaves_its_target_computed(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(AUTO_CDC)
    project.drop("1.json", [{"id": i, "seq": 1, "op": "UPSERT"} for i in range(5)])
    run = Pipeline(load_spec(project.spec_path), spark=spark).start("available_now")
    run.finish(threading.Event())

    other = str(project.root / "other")
    spark.range(1).write.format("delta").save(other)
    prefetch(spark, other).result(timeout=120)  # one thread, oldest request first: the target's is done
    target = loaded_snapshot(spark, project.layout.table("accounts"))
    assert target.version() == 1 and target.stateReconstructionTriggered()
