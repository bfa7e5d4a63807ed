"""Stream-aware VACUUM: never delete a file a stopped flow still reads; without the guard, the pitfall."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from deltaflow.commands.readers import stream_positions
from deltaflow.commands.status import pipeline_status
from deltaflow.commands.vacuum import LISTING, vacuum_table
from deltaflow.errors import ConfigError, FlowError
from deltaflow.runtime.run_plan import RunPlan
from helpers import cli

PIPELINE = """
import deltaflow as dp

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING")

@dp.table
def silver():  # with an option it reads bronze's table, as a query of its own (not carried by bronze's)
    return dp.read_stream("bronze", maxFilesPerTrigger=1000)
"""


def stopped_reader_behind_a_compaction(spark: Any, project: Any) -> Any:
    """silver stops, bronze gets two more batches, then OPTIMIZE tombstones what silver has not read."""
    pipeline = project.pipeline(spark)
    project.drop("0.json", [{"id": "a0"}, {"id": "a1"}])
    pipeline.run("available_now")
    for i in (1, 2):
        project.drop(f"{i}.json", [{"id": f"b{i}"}, {"id": f"c{i}"}])
        pipeline.run("available_now", plan=RunPlan(refresh=frozenset({"bronze"})))
    spark.sql(f"OPTIMIZE delta.`{project.table('bronze')}`")
    return pipeline


def parquet_files(table: str) -> set[str]:
    return {p.name for p in Path(table).glob("*.parquet")}


def test_vacuum_keeps_what_a_stopped_flow_needs_and_takes_it_once_read(  # type: ignore[no-untyped-def]
        spark, make_project, capsys, monkeypatch) -> None:
    from deltaflow.pipeline import Pipeline

    project = make_project(PIPELINE)
    pipeline = stopped_reader_behind_a_compaction(spark, project)
    files = parquet_files(project.table("bronze"))
    # Where silver stands, from its checkpoint: version 2, the first bronze batch it has not read
    # (version 0 created the table, 1 is the batch it read).
    [position] = stream_positions(project.layout, {"bronze": DeltaTable(project.table("bronze"))})["bronze"]
    written = {h["version"]: h["timestamp"] for h in DeltaTable(project.table("bronze")).history()}
    assert (position.flow, position.version) == ("silver", 2)
    assert position.committed_at == datetime.fromtimestamp(written[2] / 1000, UTC)

    with monkeypatch.context() as patched:  # the refusal reads logs and checkpoints: no Spark needed for it
        patched.setattr(Pipeline, "session", lambda self: pytest.fail("vacuum started Spark to refuse"))
        refused = cli(capsys, "vacuum", "bronze", "--retain", "0s", "--stopped", "--spec",
                      str(project.spec_path))
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) <= 2, refused.stderr
    assert re.search(r"flow 'silver' still reads it from version \d+, committed", refused.stderr)
    with pytest.raises(ConfigError, match="files of a batch being written now could go"):
        vacuum_table(pipeline.resolve(), "silver", timedelta(0))  # under an hour, and a run may be writing
    assert parquet_files(project.table("bronze")) == files  # nothing deleted

    # status tells, before it matters, how long silver may stay stopped.
    def warnings(days: int) -> dict[str, tuple[str, ...]]:
        later = datetime.now(UTC) + timedelta(days=days)
        return {f.flow: f.warnings for f in pipeline_status(pipeline.spec, project.layout, now=later)}

    assert warnings(0) == {"bronze": (), "silver": ()}
    [held] = warnings(6)["silver"]
    assert held.startswith("reads 'bronze' from version 2, 6d old: past 7d") and "holds back" in held, held
    [log] = warnings(25)["silver"]
    assert "log keeps 30d; run it within 4d or it will need deltaflow run --full-refresh silver" in log, log

    pipeline.run("available_now")  # silver reads the files it needed: each row once
    silver = DeltaTable(project.table("silver")).to_pyarrow_table().column("id").to_pylist()
    assert sorted(silver) == sorted(["a0", "a1", "b1", "c1", "b2", "c2"])

    dry = vacuum_table(pipeline.resolve(), "bronze", timedelta(0), dry_run=True, stopped=True)
    assert dry.files >= 3 and parquet_files(project.table("bronze")) == files  # the compacted originals
    done = vacuum_table(pipeline.resolve(), "bronze", timedelta(0), stopped=True)
    assert done.files == dry.files and len(parquet_files(project.table("bronze"))) == len(files) - dry.files
    # VACUUM's own commits (START, END) change no file: silver, caught up, needs none of them, so a second
    # VACUUM right after is not refused on its account
    assert vacuum_table(pipeline.resolve(), "bronze", timedelta(0), stopped=True).files == 0
    assert pipeline.run("available_now")  # still runs: nothing it reads is gone
    assert DeltaTable(project.table("bronze")).to_pyarrow_table().num_rows == 6


def test_without_the_guard_the_stopped_flow_fails_on_missing_files(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(PIPELINE)
    pipeline = stopped_reader_behind_a_compaction(spark, project)
    unguarded = {"spark.databricks.delta.retentionDurationCheck.enabled": "false",
                 LISTING: "8"}  # (a few listing tasks, not 10,000: quicker, and no safer)
    for key, value in unguarded.items():
        spark.conf.set(key, value)
    try:
        spark.sql(f"VACUUM delta.`{project.table('bronze')}` RETAIN 0 HOURS")  # what a hand-written job does
    finally:
        for key in unguarded:
            spark.conf.unset(key)
    with pytest.raises(FlowError, match="silver"):
        pipeline.run("available_now")
