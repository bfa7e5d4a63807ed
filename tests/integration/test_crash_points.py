"""SIGKILL at each named crash point (``deltaflow.faults``), restart: every table equals a clean run's.

One pipeline has a flow of every foreach-batch sink kind (quarantine split, auto CDC SCD 1 and 2, a
foreach-batch sink, a materialized view by window and a full one). Each round drops a new file and runs
``deltaflow run --refresh <its dataset>`` in a process of its own with ``$DELTAFLOW_CRASH_AT`` naming the
next point: the process group dies right after that flow's batch committed its Delta writes and before
Spark's checkpoint recorded the batch. A killed flow replays that batch at its next run (a later round's,
when it reads the flow, else the last run, in this process), with the files dropped since left for the
batches after it; Delta must skip what it already holds. A clean run over the same files, never killed,
gives the reference.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from helpers import Project, cli, cli_env, in_flight

pytestmark = pytest.mark.slow

DEFS = """
import deltaflow as dp
from pyspark.sql import functions as F

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING, customer STRING, seq BIGINT, amount DOUBLE, "
                                           "ts TIMESTAMP")

@dp.table
@dp.expect_or_quarantine("positive", "amount > 0")
def silver():
    return spark.readStream.table("bronze").select("id", "customer", "seq", "amount", "ts")

dp.create_streaming_table("customers")
dp.create_auto_cdc_flow(target="customers", source="silver", keys=["customer"], sequence_by="seq",
                        stored_as_scd_type=1)

dp.create_streaming_table("customers_history")
dp.create_auto_cdc_flow(target="customers_history", source="silver", keys=["customer"], sequence_by="seq",
                        stored_as_scd_type=2)

@dp.foreach_batch_sink(name="copies")
def copies(df, batch_id):
    df.write.format("delta").mode("append").save({copies!r})

@dp.append_flow(target="copies")
def to_copies():
    return spark.readStream.table("silver")

@dp.materialized_view(refresh=dp.by_window("ts", "1 hour"))
def hourly():
    return (spark.read.table("silver").groupBy(F.window("ts", "1 hour"))
            .agg(F.count("id").alias("orders"), F.sum("amount").alias("amount")))

@dp.materialized_view
def per_customer():
    return spark.read.table("silver").groupBy("customer").agg(F.count("id").alias("orders"),
                                                               F.max("seq").alias("last_seq"))
"""
#: The flows killed, one per round, in order: each a sink kind.
POINTS = ["silver", "customers", "customers_history", "to_copies", "hourly", "per_customer"]
#: Columns that differ between any two runs (when a row was written), left out of the comparison.
VOLATILE = {"ingested_at", "quarantined_at", "batch_id", "source_file", "flow"}
TABLES = ["bronze", "silver", "silver_quarantine", "customers", "customers_history", "hourly",
          "per_customer"]


def orders(round_no: int) -> list[dict[str, Any]]:
    start = datetime(2026, 11, 24, 8) + timedelta(hours=round_no)
    return [{"id": f"r{round_no}-{i}", "customer": f"c{i % 7}", "seq": round_no * 100 + i,
             "amount": float(i % 9) - 1.0, "ts": (start + timedelta(minutes=3 * i)).isoformat()}
            for i in range(40)]


def rows(path: str) -> list[tuple[Any, ...]]:
    table = DeltaTable(path).to_pyarrow_table().to_pylist()
    return sorted(tuple(sorted((k, repr(v)) for k, v in row.items() if k not in VOLATILE)) for row in table)


def project(tmp_path: Path, name: str) -> Project:
    copies = tmp_path / f"{name}-copies"
    return Project(tmp_path / name, DEFS.format(copies=str(copies)))


def test_each_crash_point_recovers_to_a_clean_runs_tables(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, capsys) -> None:
    killed, clean = project(tmp_path, "killed"), project(tmp_path, "clean")
    for round_no, flow in enumerate(POINTS):
        killed.drop(f"{round_no}.json", orders(round_no))
        clean.drop(f"{round_no}.json", orders(round_no))
        dataset = "copies" if flow == "to_copies" else flow
        run = subprocess.run(  # only the flow to kill and those it reads: a shorter run to the point
            [sys.executable, "-m", "deltaflow", "run", "--spec", str(killed.spec_path), "--available-now",
             "--refresh", dataset],
            env={**cli_env(), "DELTAFLOW_CRASH_AT": f"after_commit:{flow}"}, capture_output=True, text=True,
            timeout=600, start_new_session=True)
        assert run.returncode == -9, f"{flow}: {run.stderr[-3000:]}"
        assert f"crash point after_commit:{flow} reached" in run.stderr
        assert in_flight(killed.checkpoint(dataset, flow)), f"{flow}: its batch was recorded before the kill"
    final = cli(capsys, "run", "--spec", str(killed.spec_path), "--available-now")
    assert final.returncode == 0, final.stderr[-3000:]
    assert cli(capsys, "run", "--spec", str(clean.spec_path), "--available-now").returncode == 0

    for table in TABLES:
        assert rows(killed.table(table)) == rows(clean.table(table)), table
    assert rows(str(tmp_path / "killed-copies")) == rows(str(tmp_path / "clean-copies"))
    every = {f"r{n}-{i}" for n in range(len(POINTS)) for i in range(40)}
    landed = {row["id"] for row in killed.rows("bronze")}
    assert landed == every and len(killed.rows("bronze")) == len(every)  # nothing lost, nothing twice

    # killed during a full refresh, right after the rebuilt rows replaced the table's: the next run, asked
    # nothing, finds the refresh's record and does it again
    refresh = subprocess.run(
        [sys.executable, "-m", "deltaflow", "run", "--spec", str(killed.spec_path), "--available-now",
         "--full-refresh", "customers_history"],
        env={**cli_env(), "DELTAFLOW_CRASH_AT": "refresh_swapped:customers_history"}, capture_output=True,
        text=True, timeout=600, start_new_session=True)
    assert refresh.returncode == -9, refresh.stderr[-3000:]
    assert killed.layout.fs.exists(killed.layout.refresh_record("customers_history"))
    again = cli(capsys, "run", "--spec", str(killed.spec_path), "--available-now")
    assert again.returncode == 0 and "customers_history: full refresh" in again.stderr, again.stderr[-3000:]
    assert not killed.layout.fs.exists(killed.layout.refresh_record("customers_history"))
    assert rows(killed.table("customers_history")) == rows(clean.table("customers_history"))
