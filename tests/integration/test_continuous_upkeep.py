"""Minutes of steady Kafka input while compaction, automatic maintenance and VACUUM run, with a SIGKILL.

bronze -> silver -> by-window gold -> an auto CDC target whose change feed a downstream table reads. The
continuous run compacts (``maintenance.optimize_every``) and vacuums (``vacuum_every``) beside its flows;
it is killed mid-stream; while it is down the tables are compacted and vacuumed hard (``--retain 0s``,
the stream-aware guard deciding what may go); it restarts and catches up. Afterwards every produced
event is in bronze once, silver, gold and the CDC target equal a recomputation, the change-feed reader saw
each change once, and no query met a missing file.

``make test-long`` runs it (several minutes; not part of ``make test``).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_model import replay
from deltaflow.dev.generator import field_key, produce
from deltaflow.dev.topics import create_topic
from helpers import Project, cli, cli_env, kill_group, wait_for

pytestmark = pytest.mark.long

DEFINITIONS = """
from pyspark.sql import functions as F

import deltaflow as dp

@dp.table
def bronze():
    return dp.read_kafka(dp.parameter("topic"), max_offsets_per_trigger=5000)

@dp.table
def silver():
    return dp.parse_json(spark.readStream.table("bronze"),
                         "id STRING, key STRING, seq BIGINT, amount DOUBLE, ts TIMESTAMP",
                         required=["id", "key", "seq", "ts"])

@dp.materialized_view(refresh=dp.by_window("ts", "1 minute"))
def gold():
    return (spark.read.table("silver").groupBy(F.window("ts", "1 minute"), "key")
            .agg(F.count("*").alias("n"), F.sum("amount").alias("total")))

dp.create_streaming_table("latest", table_properties={"delta.enableChangeDataFeed": "true"})
dp.create_auto_cdc_flow(target="latest", source="silver", keys=["key"], sequence_by="seq")

@dp.table
def latest_changes():
    return dp.read_changes("latest", stream=True)
"""
SPEC = """configuration:
  topic: {topic}
trigger:
  mode: continuous
  interval: 1 second
maintenance:
  optimize_every: 3
  zorder: {{silver: [key]}}
  vacuum_every: 60s
"""
RATE = 50  # events per second
STEADY_SECONDS = 90  # of input before the kill, and again after the restart
MISSING_FILE = ("FILE_NOT_EXIST", "DELTA_MISSING_FILES", "DELTA_LOG_FILE_NOT_FOUND", "FileNotFoundException")


class Producer(threading.Thread):
    """Steady input: ``RATE`` events a second, in small bursts, until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.rng, self.seq, self.produced = random.Random(16), 0, 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(0.2):
            events = []
            for _ in range(RATE // 5):
                self.seq += 1
                events.append({"id": uuid.uuid4().hex, "key": f"k{self.rng.randrange(40)}", "seq": self.seq,
                               "amount": round(self.rng.uniform(1, 100), 2),
                               "ts": datetime.now(UTC).isoformat()})
            self.produced += produce(self.bootstrap, self.topic, events, field_key("key"))


def rows(project: Project, name: str) -> list[dict[str, Any]]:
    return DeltaTable(project.table(name)).to_pyarrow_table().to_pylist()


def operations(project: Project, name: str) -> list[str]:
    return [str(h.get("operation")) for h in DeltaTable(project.table(name)).history()]


def test_steady_input_with_upkeep_and_a_sigkill_loses_and_repeats_nothing(  # type: ignore[no-untyped-def]
        spark, kafka_bootstrap, tmp_path, capsys) -> None:
    topic = f"upkeep-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, partitions=3)
    project = Project(tmp_path / "p", DEFINITIONS, SPEC.format(topic=topic), bootstrap=kafka_bootstrap)
    command = [sys.executable, "-m", "deltaflow", "run", "--spec", str(project.spec_path)]
    producer = Producer(kafka_bootstrap, topic)
    producer.start()
    logs = []

    def run_for(seconds: float, name: str, graceful: bool) -> None:
        """A continuous run under steady input for ``seconds``, then SIGTERM (``graceful``) or SIGKILL."""
        log = tmp_path / f"{name}.log"
        logs.append(log)
        with log.open("wb") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=cli_env(),
                                    start_new_session=True)
        try:
            started = Path(project.table("latest_changes"))
            wait_for(started.is_dir, 240, "the run's start", proc, log)
            try:
                code = proc.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                pass
            else:
                raise AssertionError(f"deltaflow exited ({code}) under input: {log.read_text()[-3000:]}")
            if graceful:
                proc.terminate()
                assert proc.wait(timeout=300) == 0, log.read_text()[-3000:]
        finally:
            kill_group(proc)

    run_for(STEADY_SECONDS, "before-kill", graceful=False)
    assert "OPTIMIZE" in operations(project, "silver"), "automatic maintenance never compacted silver"

    # Down: compact everything, then vacuum as hard as the guard lets (a stopped reader keeps its files).
    spec = str(project.spec_path)
    assert cli(capsys, "optimize", "--spec", spec).returncode == 0
    for table in ("bronze", "silver", "latest"):
        vacuum = cli(capsys, "vacuum", table, "--retain", "0s", "--stopped", "--spec", spec)
        assert vacuum.returncode == 0 or "still reads it from version" in vacuum.stderr, vacuum.stderr

    run_for(STEADY_SECONDS, "after-restart", graceful=True)
    producer.stopping.set()
    producer.join()
    caught_up = cli(capsys, "run", "--available-now", "--spec", spec)  # the rest, in-process
    assert caught_up.returncode == 0, caught_up.stderr[-3000:]

    for log in logs:
        text = log.read_text()
        assert not [m for m in MISSING_FILE if m in text], text[-3000:]
    bronze = rows(project, "bronze")
    assert producer.produced > 20 * STEADY_SECONDS  # minutes of steady input
    assert len(bronze) == producer.produced  # every event once
    assert len({(r["partition"], r["offset"]) for r in bronze}) == producer.produced
    silver = rows(project, "silver")
    assert sorted(r["id"] for r in silver) == sorted(json.loads(r["value"])["id"] for r in bronze)

    totals: dict[tuple[Any, str], list[float]] = defaultdict(list)
    for r in silver:
        at = r["ts"].replace(second=0, microsecond=0)
        totals[(at, r["key"])].append(r["amount"])
    gold = {(r["window"]["start"], r["key"]): (r["n"], r["total"]) for r in rows(project, "gold")}
    assert gold.keys() == totals.keys()
    for key, amounts in totals.items():
        assert gold[key] == (len(amounts), pytest.approx(sum(amounts))), key

    columns = ["key", "seq", "id", "amount"]
    latest = {}
    for r in silver:
        if r["key"] not in latest or r["seq"] > latest[r["key"]]["seq"]:
            latest[r["key"]] = {c: r[c] for c in columns}
    expected = sorted(latest.values(), key=lambda r: r["key"])
    assert sorted(({c: r[c] for c in columns} for r in rows(project, "latest")), key=lambda r: r["key"]) \
        == expected
    changes = rows(project, "latest_changes")
    seen = [(r["_commit_version"], r["_change_type"], r["key"]) for r in changes]
    assert len(seen) == len(set(seen))  # each change once, across the kill and the compactions
    assert replay(changes, "key", columns) == expected
