"""SIGKILL at each named crash point (``deltaflow.faults``), restart: every table equals a clean run's.

One pipeline has a flow of every sink kind with deltaflow code between its commit and Spark's (an append,
a quarantine split, auto CDC SCD 1 and 2, a foreach-batch sink, a materialized view by window (with a
lateness and a distinct count: its state in deltaflow's `FirstSeen`) and a full
one). Each round drops a new file and runs
``deltaflow run --refresh <its datasets>`` in a process of its own with ``$DELTAFLOW_CRASH_AT`` naming the
round's points: the process group dies right after those flows' batches committed their Delta writes and
before Spark's checkpoint recorded them (bronze, then silver, then the five flows that read silver
together, each waiting at its point for the others). A killed flow replays that batch at its next run (a
later round's, when it reads the flow, else the last run, in this process), with the files dropped since
left for the batches after it; Delta must skip what it already holds. A clean run over the same files,
never killed, gives the reference.

Then upkeep is killed: a compaction while its Spark job writes (files no version names), right after
another one's commit (the flows reading that table not past it yet), and a VACUUM between two tables. The
runs after must skip the compaction's commit, never read an orphan file, and land every row once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
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

@dp.materialized_view(refresh=dp.by_window("ts", "1 hour", lateness="30 minutes"))
def hourly():
    return (spark.read.table("silver").groupBy(F.window("ts", "1 hour"))
            .agg(F.count("id").alias("orders"), F.sum("amount").alias("amount"),
                 F.countDistinct("customer").alias("customers")))

@dp.materialized_view
def per_customer():
    return spark.read.table("silver").groupBy("customer").agg(F.count("id").alias("orders"),
                                                               F.max("seq").alias("last_seq"))
"""
#: The flows killed, each a sink kind, one process per round: the flows a round names die with their
#: batches in flight together.
ROUNDS = [["bronze"], ["silver"], ["customers", "customers_history", "to_copies", "hourly", "per_customer"]]
POINTS = [flow for flows in ROUNDS for flow in flows]
#: The files dropped before the last run: those after the rounds' wait for the replayed batches.
FILES = 7
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


def crash(project: Project, points: str, *argv: str) -> None:
    """Run ``deltaflow ARGV`` in a process of its own with ``points`` (comma-separated) armed; it must die
    once it reached them all."""
    run = subprocess.run([sys.executable, "-m", "deltaflow", *argv, "--spec", str(project.spec_path)],
                         env={**cli_env(), "DELTAFLOW_CRASH_AT": points}, capture_output=True, text=True,
                         timeout=600, start_new_session=True)
    assert run.returncode == -9, f"{points}: {run.stderr[-3000:]}"
    for point in points.split(","):
        assert f"crash point {point.split('@')[0]} reached" in run.stderr, run.stderr[-3000:]


def operations(project: Project, table: str) -> list[str]:
    return [commit["operation"] for commit in DeltaTable(project.table(table)).history()]


def on_disk(project: Project, table: str) -> set[str]:
    """The data files in the table's folder."""
    folder = Path(project.table(table))
    return {str(p.relative_to(folder)) for p in folder.rglob("*.parquet") if "_delta_log" not in p.parts}


def unnamed_files(project: Project, table: str) -> set[str]:
    """Data files in the table's folder that no version of its log names (a killed writer's)."""
    named: set[str] = set()
    for commit in (Path(project.table(table)) / "_delta_log").glob("*.json"):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            named.update(action[kind]["path"] for kind in ("add", "remove") if kind in action)
    return on_disk(project, table) - named


def current_files(project: Project, table: str) -> set[str]:
    folder = Path(project.table(table))
    return {str(Path(uri.removeprefix("file://")).relative_to(folder))
            for uri in DeltaTable(str(folder)).file_uris()}


def test_each_crash_point_recovers_to_a_clean_runs_tables(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, capsys, request) -> None:
    killed, clean = project(tmp_path, "killed"), project(tmp_path, "clean")
    # the clean runs go on in this process while killed ones run in theirs (a run leaves a core partly idle)
    reference = ThreadPoolExecutor(1, thread_name_prefix="clean-run")
    request.addfinalizer(reference.shutdown)  # a failed test's clean run ends before the next test
    for file_no in range(FILES):
        clean.drop(f"{file_no}.json", orders(file_no))
    clean_run = reference.submit(clean.run, spark)
    for round_no, flows in enumerate(ROUNDS):
        killed.drop(f"{round_no}.json", orders(round_no))
        datasets = ["copies" if flow == "to_copies" else flow for flow in flows]
        # only the flows to kill and those they read: a shorter run to the points
        points = ",".join(f"after_commit:{flow}" for flow in flows)
        crash(killed, points, "run", "--available-now", "--refresh", ",".join(datasets))
        for flow, dataset in zip(flows, datasets, strict=True):
            assert in_flight(killed.checkpoint(dataset, flow)), f"{flow}: its batch recorded before the kill"
    for file_no in range(len(ROUNDS), FILES):
        killed.drop(f"{file_no}.json", orders(file_no))
    assert {o.state for o in clean_run.result()} == {"completed"}
    final = cli(capsys, "run", "--spec", str(killed.spec_path), "--available-now")
    assert final.returncode == 0, final.stderr[-3000:]

    for table in TABLES:
        assert rows(killed.table(table)) == rows(clean.table(table)), table
    assert rows(str(tmp_path / "killed-copies")) == rows(str(tmp_path / "clean-copies"))
    every = {f"r{n}-{i}" for n in range(FILES) for i in range(40)}
    landed = {row["id"] for row in killed.rows("bronze")}
    assert landed == every and len(killed.rows("bronze")) == len(every)  # nothing lost, nothing twice
    # the event log has each flow's rows once: a killed batch's when it ran again (its writes skipped unread)
    for flow in POINTS:
        assert killed.rows_read(flow) == clean.rows_read(flow), flow

    # killed during a full refresh, right after the rebuilt rows replaced the table's: the next run, asked
    # nothing, finds the refresh's record and does it again
    crash(killed, "refresh_swapped:customers_history", "run", "--available-now", "--full-refresh",
          "customers_history")
    assert killed.layout.fs.exists(killed.layout.refresh_record("customers_history"))
    again = cli(capsys, "run", "--spec", str(killed.spec_path), "--available-now")
    assert again.returncode == 0 and "customers_history: full refresh" in again.stderr, again.stderr[-3000:]
    assert not killed.layout.fs.exists(killed.layout.refresh_record("customers_history"))
    assert rows(killed.table("customers_history")) == rows(clean.table("customers_history"))
    next_round, last_round = FILES, FILES + 1

    # upkeep: `optimize silver bronze` compacts silver (committed, no flow has read past it yet), then is
    # killed while bronze's compaction writes: no commit, perhaps files no version names
    crash(killed, "compacting:bronze", "optimize", "silver", "bronze")
    assert operations(killed, "silver")[0] == "OPTIMIZE" and "OPTIMIZE" not in operations(killed, "bronze")
    orphans = unnamed_files(killed, "bronze")
    killed.drop(f"{next_round}.json", orders(next_round))
    assert cli(capsys, "run", "--spec", str(killed.spec_path), "--available-now").returncode == 0
    # VACUUM killed between two tables (in the pipeline's order): bronze's files no version names and
    # silver's compacted-away files are gone, customers, after them, still has its replaced files
    for file_no in (next_round, last_round):  # the clean run takes the killed one's last two rounds at once
        clean.drop(f"{file_no}.json", orders(file_no))
    clean_run = reference.submit(clean.run, spark)
    crash(killed, "vacuumed:silver", "vacuum", "--retain", "0s", "--stopped")
    assert {o.state for o in clean_run.result()} == {"completed"}  # one run in this process at a time
    assert on_disk(killed, "bronze") == current_files(killed, "bronze") and orphans.isdisjoint(
        on_disk(killed, "bronze"))
    assert on_disk(killed, "silver") == current_files(killed, "silver")
    assert on_disk(killed, "customers") > current_files(killed, "customers")
    vacuum = cli(capsys, "vacuum", "--spec", str(killed.spec_path), "--retain", "0s", "--stopped")
    assert vacuum.returncode == 0, vacuum.stderr[-3000:]

    killed.drop(f"{last_round}.json", orders(last_round))
    assert cli(capsys, "run", "--spec", str(killed.spec_path), "--available-now").returncode == 0
    for table in TABLES:
        assert rows(killed.table(table)) == rows(clean.table(table)), table
    every = {f"r{n}-{i}" for n in range(last_round + 1) for i in range(40)}
    assert sorted(row["id"] for row in killed.rows("bronze")) == sorted(every)
