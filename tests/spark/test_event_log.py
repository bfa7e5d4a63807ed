"""The event log: one row per micro-batch of every flow, and how each flow ended; `deltaflow status`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest

from deltaflow.errors import FlowError
from deltaflow.pipeline import Pipeline
from deltaflow.spec import load_spec
from helpers import Project, cli, cli_env

PIPELINE = """
import deltaflow as dp
from pyspark.sql import functions as F

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING, n INT")

@dp.table
def silver():
    return spark.readStream.option("maxFilesPerTrigger", 1).table("bronze").where("n > 0")

@dp.table
def fragile():
    return spark.readStream.table("bronze").select(
        F.when(F.col("n") < 0, F.raise_error(F.lit("negative n"))).otherwise(F.col("n")).alias("n"))
"""


def numbered(prefix: str, values: list[int]) -> list[dict[str, Any]]:
    return [{"id": f"{prefix}-{i}", "n": n} for i, n in enumerate(values)]


def run(spark, project: Project) -> None:  # type: ignore[no-untyped-def]
    spec = load_spec(project.spec_path)
    Pipeline(spec, spark=spark).run("available_now")


def events(project: Project) -> list[dict[str, Any]]:
    layout = project.layout
    return layout.open_table(layout.event_log).to_pyarrow_table().to_pylist()


def test_every_batch_and_flow_end_is_logged_and_status_reads_it_without_spark(  # type: ignore[no-untyped-def]
        spark, make_project, capsys, monkeypatch, storage) -> None:
    project = make_project(PIPELINE, s3=storage)
    project.drop("a.json", numbered("a", [1, 2, 0]))
    project.drop("b.json", numbered("b", [3]))
    run(spark, project)
    project.drop("c.json", numbered("c", [4, -1]))
    with pytest.raises(FlowError, match=r"'fragile'.*negative n"):
        run(spark, project)

    log = events(project)
    assert spark.read.format("delta").load(project.layout.event_log).count() == len(log)
    first_seen = {e["run_id"]: min(x["end_time"] for x in log if x["run_id"] == e["run_id"]) for e in log}
    runs = sorted(first_seen, key=first_seen.__getitem__)
    assert len(runs) == 2 and {e["pipeline"] for e in log} == {"test"}
    batches = [e for e in log if e["kind"] == "batch" and e["input_rows"]]
    def rows_in(flow: str) -> int:
        return sum(e["input_rows"] for e in batches if e["flow"] == flow)

    assert (rows_in("bronze"), rows_in("silver")) == (6, 6)  # each row once, whichever run read it
    silver = sorted(e["batch_id"] for e in batches if e["flow"] == "silver")
    assert silver == list(range(len(silver))) and len(silver) >= 2  # every batch, each once
    for event in batches:
        assert event["duration_ms"] > 0 and event["end_time"] >= event["start_time"]
        assert "triggerExecution" in json.loads(event["durations_ms"])
        sources = json.loads(event["sources"])
        assert sources and sources[0]["end_offset"] is not None
    delta_batches = sorted((e for e in batches if e["flow"] == "silver"), key=lambda e: e["end_time"])
    # Backlog: silver reads one bronze file per batch, so every batch but the last of a run leaves some.
    assert [e["delta_versions_behind"] for e in delta_batches][-1] == 0
    assert all(e["delta_versions_behind"] is not None for e in delta_batches)
    ends = {(e["run_id"], e["flow"]): (e["kind"], e["error"]) for e in log if e["kind"] != "batch"}
    assert {ends[(runs[0], f)][0] for f in ("bronze", "silver", "fragile")} | {
        ends[(runs[1], f)][0] for f in ("bronze", "silver")} == {"completed"}
    kind, error = ends[(runs[1], "fragile")]
    assert kind == "failed" and "negative n" in error

    # `deltaflow status` answers from the log with deltalake: no Spark is imported.
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "deltaflow", "status", "--json",
                             "--spec", str(project.spec_path)], capture_output=True, text=True, env=cli_env(),
                            timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "pyspark" not in result.stderr and "py4j" not in result.stderr
    # Nor pandas or pyarrow.dataset (half a second of start): deltalake's engine reads the log.
    assert not re.search(r"\|\s+(pandas|pyarrow\.dataset)$", result.stderr, re.MULTILINE)
    status = {s["flow"]: s for s in map(json.loads, result.stdout.splitlines())}
    assert {f: s["state"] for f, s in status.items()} == {"bronze": "completed", "silver": "completed",
                                                          "fragile": "failed"}
    assert "negative n" in status["fragile"]["error"]
    assert status["silver"]["last_batch"] == silver[-1] and status["silver"]["age_seconds"] >= 0
    assert not any(s["falling_behind"] for s in status.values())
    monkeypatch.setenv("COLUMNS", "80")  # a usual terminal: each flow and state whole, the error below
    table = cli(capsys, "status", "--spec", str(project.spec_path))
    assert table.returncode == 0 and re.search(r"^fragile +failed ", table.stdout, re.MULTILINE), table.stdout
    assert f"fragile: {status['fragile']['error']}\n" in table.stdout  # one line, whole


def test_status_before_any_run_lists_the_flows_as_not_run_yet(make_project, capsys) -> None:  # type: ignore[no-untyped-def]
    project = make_project(PIPELINE)
    result = cli(capsys, "status", "--spec", str(project.spec_path))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    flows = {line.split()[0]: line for line in result.stdout.splitlines()[2:] if line.strip()}
    assert flows and all("not run yet" in line for line in flows.values()), result.stdout
    assert not project.storage.exists()  # status writes nothing
