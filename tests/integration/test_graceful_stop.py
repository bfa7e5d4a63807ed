"""SIGTERM stops `deltaflow run --continuous` between batches, sent to the process or to its whole group
(as systemd, `timeout` and `kill -- -PGID` do), once or twice within a second; a restart appends nothing
again. A second one a second or more later stops it at once, in one line, and the next run writes the batch
in flight once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from deltalake import DeltaTable

from deltaflow.cli.main import SAME_STOP_SECONDS
from helpers import Project, cli, cli_env, in_flight, wait_for, wait_group_gone

EVENTS = 3_000


def rows_in(path: str) -> int:
    try:
        return DeltaTable(path).to_pyarrow_dataset().count_rows()
    except Exception:  # table not created yet
        return 0


def test_sigterm_stops_cleanly_and_restart_reappends_nothing(  # type: ignore[no-untyped-def]
        spark, kafka_bootstrap: str, tmp_path: Path, capsys) -> None:
    from deltaflow.dev.generator import produce
    from deltaflow.dev.topics import create_topic

    topic = f"graceful-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, partitions=3)
    produce(kafka_bootstrap, topic, [{"event_id": str(i)} for i in range(EVENTS)])
    project = Project(tmp_path / "p", "import deltaflow as dp\n\n@dp.table\ndef bronze():\n"
                      f"    return dp.read_kafka('{topic}', max_offsets_per_trigger=500)\n",
                      bootstrap=kafka_bootstrap)
    table = project.table("bronze")
    base = [sys.executable, "-m", "deltaflow", "run", "--spec", str(project.spec_path)]
    proc = subprocess.Popen([*base, "--continuous"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=cli_env(), text=True)
    deadline = time.monotonic() + 180
    while rows_in(table) < EVENTS:
        assert proc.poll() is None, proc.communicate()[0][-2000:]
        assert time.monotonic() < deadline, "timed out waiting for the rows"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, output[-2000:]
    assert "SIGTERM: stopping after the current batch" in output
    assert "bronze: stopped" in output

    checkpoint = project.checkpoint("bronze")
    offsets = {p.name for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()}
    commits = {p.name for p in (checkpoint / "commits").iterdir() if p.name.isdigit()}
    assert offsets == commits, "a batch was left half done"
    version = DeltaTable(table).version()

    again = cli(capsys, "run", "--spec", str(project.spec_path), "--available-now")  # in-process: no signal
    assert again.returncode == 0, again.stderr[-2000:]
    assert "bronze: completed, read 0 rows this run" in again.stderr
    assert DeltaTable(table).version() == version
    result = DeltaTable(table).to_pyarrow_table(columns=["partition", "offset"])
    pairs = set(zip(result["partition"].to_pylist(), result["offset"].to_pylist(), strict=True))
    assert result.num_rows == len(pairs) == EVENTS


@pytest.mark.timeout(300)  # a stop that waits for a gap between triggers never ends: fail, don't hang
def test_stop_under_steady_input_ends_and_loses_nothing(spark, kafka_bootstrap: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """With input arriving all the time a new batch starts the instant one commits; stop must still end."""
    import threading

    from deltaflow.dev.generator import EventGenerator
    from deltaflow.dev.topics import create_topic
    from deltaflow.pipeline import Pipeline
    from deltaflow.spec import load_spec

    topic = f"steady-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, partitions=3)
    project = Project(tmp_path / "p", "import deltaflow as dp\n\n@dp.table\ndef bronze():\n"
                      f"    return dp.read_kafka('{topic}', max_offsets_per_trigger=1000)\n",
                      bootstrap=kafka_bootstrap)
    generator = EventGenerator(kafka_bootstrap, topic, rate=1000)
    generator.start()
    try:
        spec = load_spec(project.spec_path)
        run = Pipeline(spec, spark=spark).start("continuous")
        query = run.queries["bronze"]
        deadline = time.monotonic() + 120
        while (query.lastProgress is None or query.lastProgress.batchId < 3) and time.monotonic() < deadline:
            assert query.isActive, query.exception()
            time.sleep(0.05)
        stop = threading.Event()
        stop.set()
        outcomes = run.wait(stop, grace_seconds=3600)
        assert [o.state for o in outcomes] == ["stopped"]
        assert not query.isActive
    finally:
        generator.stop()
        generator.join(timeout=30)
    produced = generator.produced

    project.run(spark)  # the rest, including any batch cancelled by the stop
    result = DeltaTable(project.table("bronze")).to_pyarrow_table(columns=["partition", "offset"])
    pairs = set(zip(result["partition"].to_pylist(), result["offset"].to_pylist(), strict=True))
    assert result.num_rows == len(pairs) == produced


STUCK = """
import os
import pathlib
import threading

import deltaflow as dp

@dp.table
def bronze():
    return dp.read_files("landing", format="json", schema="id STRING")

@dp.foreach_batch_sink(name="copies")
def copies(df, batch_id):
    if os.environ.get("STUCK_SINK"):  # the batch that never ends: only a stop "at once" ends this run
        pathlib.Path({marker!r}).touch()
        threading.Event().wait()
    df.write.format("delta").mode("append").save({copies!r})

@dp.append_flow(target="copies")
def to_copies():
    return spark.readStream.table("bronze")
"""


def test_a_second_sigterm_stops_at_once_in_one_line_and_the_next_run_loses_nothing(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, capsys) -> None:
    marker, copies = tmp_path / "stuck", tmp_path / "copies"
    project = Project(tmp_path / "p", STUCK.format(marker=str(marker), copies=str(copies)))
    project.drop("0.json", [{"id": f"e{i}"} for i in range(100)])
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "deltaflow", "run", "--continuous", "--spec",
                                 str(project.spec_path)], stdout=out, stderr=subprocess.STDOUT,
                                env={**cli_env(), "STUCK_SINK": "1"}, start_new_session=True)
    wait_for(marker.exists, 180, "the sink's batch to start", proc, log)
    proc.send_signal(signal.SIGTERM)  # the graceful stop waits for that batch, which never ends
    wait_for(lambda: b"stopping after the current batch" in log.read_bytes(), 60, "the first SIGTERM", proc,
             log)
    time.sleep(SAME_STOP_SECONDS)  # the gap is the behaviour: closer than this, it is the same stop
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    output = log.read_text()
    after = output[output.index("stopping after the current batch"):].splitlines()[1:]
    assert after == ["SIGTERM again: stopped at once; the next run writes the batches in flight again, "
                     "each once"], output[-3000:]  # no stack trace of the stopped queries, no Spark log
    wait_group_gone(proc, "the run's JVM outlived it")  # killed with it, not left to linger
    assert in_flight(project.checkpoint("copies", "to_copies")), "the stuck batch was not in flight"

    again = cli(capsys, "run", "--spec", str(project.spec_path), "--available-now")  # in-process: not stuck
    assert again.returncode == 0, again.stderr[-3000:]
    landed = DeltaTable(str(copies)).to_pyarrow_table(columns=["id"])["id"].to_pylist()
    assert sorted(landed) == sorted(f"e{i}" for i in range(100))  # each once
    assert sorted(r["id"] for r in project.rows("bronze")) == sorted(landed)


TWO_FLOWS = """
import deltaflow as dp

@dp.table
def bronze():
    return dp.read_files("landing", format="json", schema="id STRING", max_files_per_trigger=1)

@dp.table
def silver():
    return spark.readStream.table("bronze").where("id IS NOT NULL")
"""
#: Files of TWO_FLOWS' landing, one per batch: the signal comes after silver's second batch, with more to go;
#: the next run, in this process, takes what is left one file per batch.
GROUP_FILES = 8


@pytest.mark.parametrize("how", ["kill -- -PGID", "timeout"])
def test_a_sigterm_to_the_process_group_is_a_clean_stop(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, capsys, how: str) -> None:
    """The JVM shares the group: its own shutdown must not pre-empt the stop (issue 40, problem 1).

    ``timeout``, told to stop, signals the run and then its whole group: two SIGTERMs within a second.
    """
    project = Project(tmp_path / "p", TWO_FLOWS)
    for n in range(GROUP_FILES):
        project.drop(f"{n:02d}.json", [{"id": f"e{n}-{i}"} for i in range(50)])
    log = tmp_path / "run.log"
    command = [sys.executable, "-m", "deltaflow", "run", "--continuous", "--spec", str(project.spec_path)]
    if how == "timeout":
        command = ["timeout", "--preserve-status", "-s", "TERM", "600", *command]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=cli_env(),
                                start_new_session=True)
    silver = Path(project.table("silver")) / "_delta_log" / f"{2:020d}.json"  # 0 created it, then batches
    wait_for(silver.exists, 180, "silver's first batches", proc, log)
    if how == "timeout":
        proc.send_signal(signal.SIGTERM)  # what timeout does when its time is up: the child, then the group
    else:
        os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
    output = log.read_text()
    assert output.count("stopping after the current batch") == 1, output[-3000:]
    assert "bronze: stopped" in output and "silver: stopped" in output, output[-3000:]
    for word in ("Traceback", "Exception", "error:"):
        assert word not in output, output[-3000:]
    wait_group_gone(proc, "the run's JVM outlived the stop")

    again = cli(capsys, "run", "--spec", str(project.spec_path), "--available-now")
    assert again.returncode == 0, again.stderr[-2000:]
    expected = sorted(f"e{n}-{i}" for n in range(GROUP_FILES) for i in range(50))
    for table in ("bronze", "silver"):
        assert sorted(r["id"] for r in project.rows(table)) == expected, table
