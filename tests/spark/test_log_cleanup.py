"""Log cleanup to the minute: the log keeps its retention, and every entry a stopped flow restarts from."""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from test_vacuum import PIPELINE  # bronze from files; silver streams it, a query of its own

from deltaflow.commands.log_cleanup import clean_log
from deltaflow.runtime.maintenance import Maintainer
from deltaflow.runtime.run_plan import RunPlan

HOURS_AGO = 3


def entries(table: str) -> dict[int, list[Path]]:
    """The files of ``table``'s Delta log by version (commits, checksums, checkpoints)."""
    found: dict[int, list[Path]] = {}
    for path in Path(table, "_delta_log").iterdir():
        if path.name[:20].isdigit():
            found.setdefault(int(path.name[:20]), []).append(path)
    return found


def backdate(table: str, below: int) -> None:
    """Make the entries of the versions under ``below`` hours old, a second apart, in version order."""
    start = time.time() - HOURS_AGO * 3_600
    for version, paths in entries(table).items():
        for path in paths:
            if version < below:
                os.utime(path, (start + version, start + version))


def ids(table: str) -> list[str]:
    return sorted(DeltaTable(table).to_pyarrow_table().column("id").to_pylist())


def test_the_log_keeps_its_retention_and_what_a_stopped_flow_restarts_from(  # type: ignore[no-untyped-def]
        spark, make_project) -> None:
    project = make_project(PIPELINE, spec_extra="maintenance:\n  vacuum_every: 1h\n")
    bronze = project.table("bronze")
    pipeline = project.pipeline(spark)
    project.drop("0.json", [{"id": "a0"}])
    pipeline.run("available_now")
    spark.sql(f"ALTER TABLE delta.`{bronze}` SET TBLPROPERTIES ('delta.logRetentionDuration' = '1 hour', "
              "'delta.deletedFileRetentionDuration' = '1 hour')")
    for i in range(3):  # silver stops here; bronze goes on, past two checkpoints (each 10 versions)
        project.drop(f"{i + 1}.json", [{"id": f"b{i}"}, {"id": f"c{i}"}])
        pipeline.run("available_now", plan=RunPlan(refresh=frozenset({"bronze"})))
    # another writer of bronze: delta-rs, as kafka-delta-ingest (no .crc), checkpointing every 10 versions
    # as Delta does (delta-rs's own interval is 100); 20 commits in 0.4 s where Spark's writer took 13 s
    other = DeltaTable(bronze)
    row = other.to_pyarrow_table().slice(0, 1)
    for i in range(20):
        write_deltalake(other, row.set_column(row.schema.get_field_index("id"), "id", pa.array([f"d{i}"])),
                        mode="append")
        if other.version() % 10 == 0:
            other.create_checkpoint()
    latest = max(entries(bronze))
    backdate(bronze, latest - 2)  # all but the last entries are past the hour the table keeps
    before, rows = entries(bronze), ids(bronze)

    # silver has committed one batch: on restart Spark plans it again, and Delta's source reads bronze's
    # log from where that batch began, which its checkpoint does not say: the whole log stays
    whole = clean_log(pipeline.resolve(), "bronze")
    assert (whole.held_by, whole.retention, whole.files) == ("silver", None, 0), whole
    pipeline.run("available_now", plan=RunPlan(refresh=frozenset({"silver"})))
    assert ids(project.table("silver")) == rows  # each bronze row once

    # Its second batch began at version 2, three hours old: that entry and every later one stay (Delta
    # would keep only from version 20, the newest checkpoint an hour old, and silver would then fail with
    # DELTA_MISSING_FILES_UNEXPECTED_VERSION "cannot resume from version 2").
    held = clean_log(pipeline.resolve(), "bronze")
    assert (held.held_by, held.files) == ("silver", 0), held
    assert held.retention is not None and held.retention.total_seconds() > HOURS_AGO * 3_600
    assert entries(bronze).keys() == before.keys()
    project.drop("8.json", [{"id": "e0"}])
    pipeline.run("available_now")  # a third batch, from a version written now
    rows = sorted([*rows, "e0"])
    assert ids(project.table("silver")) == ids(bronze) == rows

    # silver has caught up: the maintenance block's vacuum step trims the log to the hour, to a checkpoint
    messages: list[str] = []
    clock = itertools.chain([0.0], itertools.repeat(7_200.0))  # the vacuum step is due, once
    maintainer = Maintainer(pipeline.resolve(), messages.append, clock=lambda: next(clock))
    maintainer.close(cancel=False)
    kept = entries(bronze)
    assert min(kept) == 20 and any(p.name.endswith(".checkpoint.parquet") for p in kept[20]), sorted(kept)
    assert kept.keys() & before.keys() == {v for v in before if v >= 20}  # (and VACUUM's own commits)
    trimmed = next(m for m in messages if "trimmed the log of 'bronze'" in m)
    assert f"{sum(len(before[v]) for v in before if v < 20)} files, over 1h old" in trimmed, messages
    assert ids(bronze) == rows and spark.read.format("delta").load(bronze).count() == len(rows)

    project.drop("9.json", [{"id": "f0"}])  # both flows go on from where they were: each row once
    pipeline.run("available_now")
    assert ids(project.table("silver")) == ids(bronze) == sorted([*rows, "f0"])
