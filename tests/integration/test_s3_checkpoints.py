"""Streaming checkpoints on S3 (``io.deltaflow.storage.ConditionalCheckpointFileManager``): each checkpoint
file is one PUT at its own name, a batch's file is created only if absent, and a cancelled file is never
stored. The requests are counted by the session's S3 server itself (:mod:`deltaflow.dev.s3_faults`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError
from test_storage_faults import PIPELINE as BRONZE_SILVER  # bronze from files; silver streams it

from deltaflow.dev.s3_faults import FaultRule, S3Faults
from deltaflow.runtime.jvm_names import java_class
from deltaflow.spec import S3Spec
from helpers import Project

PIPELINE = BRONZE_SILVER + """
@dp.table
def unique():  # stateful: a query of its own, with a state store in its checkpoint
    return spark.readStream.table("silver").dropDuplicates(["id"])
"""
MANAGER = "io.deltaflow.storage.ConditionalCheckpointFileManager"
SPARK_INTERFACE = "org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager"


def hadoop_path(spark: Any, path: str) -> Any:
    return java_class(spark, "org.apache.hadoop.fs.Path")(path)


def manager_for(spark: Any, folder: str) -> Any:
    """The checkpoint file manager Spark's queries get for ``folder`` in this session."""
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    return java_class(spark, SPARK_INTERFACE).create(hadoop_path(spark, folder), conf)


def test_each_checkpoint_file_is_one_put_at_its_name_and_every_row_lands_once(  # type: ignore[no-untyped-def]
        spark, make_project, s3_root: str, s3_spec: S3Spec, faults: S3Faults) -> None:
    project: Project = make_project(PIPELINE, s3=(s3_root, s3_spec))
    batch_files = r"/_checkpoints/[^?]*/(offsets|commits)/\d+$"
    faults.set([FaultRule(path=batch_files, method="PUT", status=None),  # counted, not failed
                FaultRule(path=r"/_checkpoints/[^?]*\.tmp$", status=None)])  # Spark's temporary files
    for run in range(2):
        project.drop(f"{run}.json", [{"id": f"e{run}-{i}", "n": i} for i in range(20)])
        project.run(spark)
    puts, temporary = faults.hits()
    faults.clear()

    fs, stored = project.layout.fs, 0
    for flow in ("bronze", "silver", "unique"):  # (a flow carried in another's batch has no files)
        checkpoint = project.layout.checkpoint(flow, flow, 0).path
        for kind in ("offsets", "commits"):
            stored += sum(name.isdigit() for name in fs.list(f"{checkpoint}/{kind}"))
    assert stored >= 8  # two runs, a batch each, at least two queries: an offsets and a commit file each
    assert (puts, temporary) == (stored, 0)  # one PUT per file, and no temporary file to copy from
    expected = sorted(f"e{run}-{i}" for run in range(2) for i in range(20))
    for table in ("bronze", "silver", "unique"):
        assert sorted(r["id"] for r in project.rows(table)) == expected, table


def test_a_batch_file_is_created_once_a_lost_answer_is_no_conflict_and_a_cancelled_one_is_not_stored(
        spark: Any, make_project: Any, s3_root: str, s3_spec: S3Spec, faults: S3Faults) -> None:
    project: Project = make_project(PIPELINE, s3=(s3_root, s3_spec))
    project.pipeline(spark)  # the session's S3A settings for this server
    folder = f"{s3_root}/_checkpoints/probe/offsets"
    manager = manager_for(spark, folder)
    assert manager.getClass().getName() == MANAGER  # the session's setting, as Spark's queries get it
    manager.mkdirs(hadoop_path(spark, folder))

    def put(name: str, data: bytes, overwrite: bool = False) -> Any:
        out = manager.createAtomic(hadoop_path(spark, f"{folder}/{name}"), overwrite)
        out.write(bytearray(data))
        return out

    def stored(name: str) -> bytes | None:
        return project.layout.fs.read_bytes(f"{folder}/{name}")

    put("0", b'{"batch": 0}').close()
    second = put("0", b'{"batch": "another writer"}')
    with pytest.raises(Py4JJavaError, match="FileAlreadyExistsException"):
        second.close()  # S3 refused the second PUT: Spark takes it as another writer of this batch
    assert stored("0") == b'{"batch": 0}'

    # the first attempt is stored and its answer dropped; the client's retry meets it: the same bytes
    faults.set([FaultRule(path=r"/_checkpoints/probe/offsets/1$", method="PUT", answer_lost=True, first=1)])
    put("1", b'{"batch": 1}').close()
    assert faults.hits() == [1]
    faults.clear()
    assert stored("1") == b'{"batch": 1}'

    cancelled = put("2", b'{"batch": 2}')
    cancelled.cancel()
    cancelled.close()
    assert stored("2") is None  # nothing uploaded

    put("0", b'{"batch": 0, "rewritten": true}', overwrite=True).close()  # metadata files Spark replaces
    assert stored("0") == b'{"batch": 0, "rewritten": true}'


def test_checkpoints_elsewhere_keep_spark_s_own_manager(spark: Any, tmp_path: Path) -> None:
    manager = manager_for(spark, str(tmp_path))
    assert manager.getClass().getName() == MANAGER and "FileContextBased" in manager.toString()
    out = manager.createAtomic(hadoop_path(spark, str(tmp_path / "0")), False)
    out.write(bytearray(b"local"))
    assert not (tmp_path / "0").exists()  # Spark's own: a temporary file, renamed at close
    out.close()
    assert (tmp_path / "0").read_bytes() == b"local"
