"""A wrong command line is one line on stderr and exit 2, told before Spark starts (issue 73, problem 6).

Every case runs on a project ``deltaflow init`` wrote, in this process, with pyspark's JVM launch made to
raise (:func:`no_jvm`): ``SparkContext._ensure_initialized`` is where every SparkContext, hence every
SparkSession, launches or joins its JVM, so a check that came after Spark started fails the test with
``SparkStarted`` at once (a ``BaseException``: no ``except Exception`` on the way turns it into an error
line) instead of waiting for a JVM. ``test_the_guard_catches_a_spark_start`` proves the guard catches
deltaflow's own session start. The console script is run once in a subprocess whose environment points
pyspark at a gateway that is not there (``PYSPARK_GATEWAY_PORT``): pyspark then joins instead of
launching, so no JVM can start in it either.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deltaflow.commands.init import init_project
from deltaflow.errors import ArgumentError, ConfigError
from deltaflow.pipeline import Pipeline
from deltaflow.runtime.run_plan import RunPlan
from helpers import SparkStarted, cli


@pytest.fixture(scope="module")
def starter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The starter project: landing/ -> bronze_events -> silver_events (quarantine rule) -> gold_actions."""
    folder = tmp_path_factory.mktemp("args") / "shop"
    init_project(folder)
    return folder


USAGE = [
    (["rewind", "silver_events"], "give the version (--to-version) or the time (--to-timestamp)"),
    (["rewind", "silver_events", "--to-version", "1", "--to-timestamp", "2026-01-01"], "not both"),
    (["rewind", "silver_events", "--to-timestamp", "yesterday"], "--to-timestamp: 'yesterday' is not a time"),
    (["rewind", "silver_events", "--to-version", "-1"], "'--to-version'"),
    (["rewind", "silver_event", "--to-version", "1"], "unknown table 'silver_event' (did you mean "
     "'silver_events'?)"),
    (["rewind", "gold_actions", "--to-version", "1"], "'gold_actions' is a materialized view, not a "
     "streaming table"),
    (["quarantine", "replay", "bronze_events"], "'bronze_events' has no flow writing a quarantine"),
    (["quarantine", "replay", "gold_actions"], "'gold_actions' has no flow writing a quarantine"),
    (["quarantine", "replay", "silver_evnts"], "unknown table 'silver_evnts'"),
    (["quarantine", "replay"], "deltaflow quarantine replay TABLE"),
    (["quarantine", "silver_events", "--where", "true"], "--where is for 'deltaflow quarantine replay"),
    (["quarantine", "silver_events", "--sample", "-1"], "'--sample'"),
    (["vacuum", "bronze_event"], "vacuum: unknown table 'bronze_event'"),
    (["vacuum", "--retain", "7 dayz"], "--retain: '7 dayz' is not a duration"),
    (["vacuum", "--retain", "10m"], "--retain 10m: files of a batch being written now could go"),
    (["optimize", "gold"], "optimize: unknown table 'gold'"),
    (["run", "--refresh", "silver"], "--refresh: unknown dataset 'silver'"),
    (["run", "--full-refresh", "bronze_events,gold"], "--full-refresh: unknown dataset 'gold'"),
    (["run", "--once", "--continuous"], "choose one of --available-now, --continuous, --once"),
    (["run", "--continuous", "--interval", "soon"], "--interval: 'soon' is not a duration"),
    (["run", "--once", "--interval", "5 seconds"], "--interval is for continuous flows, not --once"),
    (["graph", "--json"], "No such option: --json"),
    (["graph", "--format", "svg"], "'svg' is not one of"),
    (["changes", "silver_events", "--from", "5", "--to", "2"], "--to 2 is before --from 5"),
    (["history", "silver_events", "--limit", "-1"], "'--limit'"),
    (["status", "--jsn"], "No such option: --jsn"),
]


@pytest.mark.parametrize(("args", "says"), USAGE, ids=[" ".join(a) for a, _ in USAGE])
def test_a_wrong_command_line_is_one_line_and_exit_2_before_spark(
        starter: Path, capsys: pytest.CaptureFixture[str], no_jvm: None, args: list[str], says: str) -> None:
    done = cli(capsys, *args, "--spec", str(starter))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert says in done.stderr and "full error is in" not in done.stderr and done.stdout == "", done.stderr


def test_an_unknown_example_is_one_line_and_exit_2_before_anything_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], no_jvm: None) -> None:
    for args in (["demo", "--example", "nope", "--storage", str(tmp_path / "demo")],
                 ["init", str(tmp_path / "new"), "--example", "nope"]):
        done = cli(capsys, *args)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "DF-USAGE" in done.stderr and "example 'nope'" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []  # no broker state, no project


def test_nothing_quarantined_yet_is_one_line_and_exit_1_before_spark(
        starter: Path, capsys: pytest.CaptureFixture[str], no_jvm: None) -> None:
    done = cli(capsys, "quarantine", "replay", "silver_events", "--spec", str(starter))
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "DF-CONFIG quarantine replay: 'silver_events' has nothing quarantined to replay" in done.stderr


def test_what_the_last_run_resolved_refuses_a_replay_and_a_zorder_before_spark(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], no_jvm: None) -> None:
    """After a run (its graph record, its tables), a replay of rows read from files is refused at once."""
    import pyarrow as pa
    from deltalake import write_deltalake

    init_project(tmp_path)
    pipeline = Pipeline.load(tmp_path)
    layout = pipeline.layout
    bronze = pa.table({"event_id": ["e1"], "user_id": [None], "source_file": ["landing/a.json"]})
    write_deltalake(layout.table("bronze_events"), bronze)
    write_deltalake(layout.quarantine("silver_events"), pa.table({"flow": ["silver_events"]}))
    flow = {"flow": "silver_events", "inputs": {"bronze_events": "stream"}, "quarantines": True}
    record = {"fingerprint": pipeline.fingerprint(), "datasets": [
        {"dataset": "bronze_events", "kind": "table", "flows": [{"flow": "bronze_events", "inputs": {}}]},
        {"dataset": "silver_events", "kind": "table", "flows": [flow]}]}
    layout.fs.write_text(layout.graph_record, json.dumps(record))

    for args, says in [(["quarantine", "replay", "silver_events"], "'silver_events' cannot be replayed: its "
                        "flow must stream one table whose rows carry their Kafka position"),
                       (["optimize", "bronze_events", "--zorder", "user"], "optimize 'bronze_events' "
                        "--zorder: no column 'user' (did you mean 'user_id'?)")]:
        done = cli(capsys, *args, "--spec", str(tmp_path))
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert says in done.stderr, done.stderr
    (tmp_path / "transformations" / "pipeline.py").write_text(
        (tmp_path / "transformations" / "pipeline.py").read_text() + "\n# changed\n")
    with pytest.raises(SparkStarted):  # the record is out of date: only resolving the flow can tell
        cli(capsys, "quarantine", "replay", "silver_events", "--spec", str(tmp_path))


def test_the_facade_checks_its_arguments_before_resolving(starter: Path, no_jvm: None) -> None:
    pipeline = Pipeline.load(starter)
    calls = [
        (lambda: pipeline.rewind("silver_events"), "give the version"),
        (lambda: pipeline.rewind("gold_actions", 0), "not a streaming table"),
        (lambda: pipeline.replay_quarantine("bronze_events"), "has no flow writing a quarantine"),
        (lambda: pipeline.vacuum(["nope"]), "unknown table 'nope'"),
        (lambda: pipeline.optimize(["nope"]), "unknown table 'nope'"),
        (lambda: pipeline.run("continuous", "soon"), "'soon' is not a duration"),
        (lambda: pipeline.start(plan=RunPlan(refresh=frozenset({"nope"}))), "unknown dataset 'nope'"),
    ]
    for call, says in calls:
        with pytest.raises(ArgumentError, match=says) as info:
            call()
        assert isinstance(info.value, ConfigError) and str(info.value).startswith("DF-USAGE ")


def test_the_guard_catches_a_spark_start(starter: Path, no_jvm: None) -> None:
    with pytest.raises(SparkStarted):
        Pipeline.load(starter).session()


@pytest.mark.parametrize("args", [["rewind", "silver_events"], ["quarantine", "replay", "bronze_events"]])
def test_the_issues_two_command_lines_exit_2_in_one_line_from_the_console_script(
        starter: Path, args: list[str]) -> None:
    env = {**os.environ, "PYSPARK_GATEWAY_PORT": "9", "PYSPARK_GATEWAY_SECRET": "none"}  # no JVM can start
    done = subprocess.run([sys.executable, "-m", "deltaflow", *args], cwd=starter, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error: DF-USAGE "), done.stderr
