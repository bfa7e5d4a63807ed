"""Exactly once under crashes: SIGKILL `deltaflow run --continuous` again and again, then finish.

Every kill takes down the whole process group (Python driver and Spark JVM) at once, as a power cut or an
OOM kill would. Some kills are aimed at a micro-batch in flight (its offsets logged in the checkpoint, its
commit not yet written), the case where a naive sink duplicates or loses rows.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from deltalake import DeltaTable

from deltaflow.runtime.scratch import scratch_dir, scratch_root, sweep
from helpers import Project, batch_ids, cli, cli_env, in_flight, kill_group, wait_for

pytestmark = pytest.mark.slow

EVENTS = 50_000
KILLS = 5
BATCH = 2_500

BRONZE = """
import deltaflow as dp

@dp.table
def bronze_events():
    return dp.read_kafka("{topic}", max_offsets_per_trigger={batch})
"""


def test_exactly_once_across_repeated_sigkills(  # type: ignore[no-untyped-def]
        spark, kafka_bootstrap: str, tmp_path: Path, capsys) -> None:
    from deltaflow.dev.generator import produce
    from deltaflow.dev.topics import create_topic

    rng = random.Random(20261121)
    topic = f"exactly-once-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, partitions=3)
    ids = [f"evt-{i:06d}" for i in range(EVENTS)]
    produce(kafka_bootstrap, topic, [{"event_id": e, "n": i} for i, e in enumerate(ids)])

    project = Project(tmp_path / "p", BRONZE.format(topic=topic, batch=BATCH), bootstrap=kafka_bootstrap)
    checkpoint = project.checkpoint("bronze_events")
    command = [sys.executable, "-m", "deltaflow", "run", "--continuous", "--spec", str(project.spec_path)]
    kills_in_flight = 0
    scratch_before = set(scratch_root().iterdir())
    for attempt in range(KILLS):
        log = tmp_path / f"run-{attempt}.log"
        # a batch the last kill left in flight is not this run's: it must begin one of its own
        committed_before, begun_before = batch_ids(checkpoint / "commits"), batch_ids(checkpoint / "offsets")
        with log.open("wb") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=cli_env(),
                                    start_new_session=True)
        try:
            if attempt % 2 == 0:
                # Aim at a batch being written: offsets logged, commit missing.
                wait_for(lambda before=begun_before: in_flight(checkpoint) - before, 180,
                         "a batch in flight", proc, log)
            else:
                wait_for(lambda before=committed_before: batch_ids(checkpoint / "commits") - before, 180,
                         "a committed batch", proc, log)
                time.sleep(rng.uniform(0.0, 1.5))  # a random moment: the kill itself is the event under test
        finally:
            kill_group(proc)
        if in_flight(checkpoint) - begun_before:  # a batch this run began, still in flight after death
            kills_in_flight += 1

    assert kills_in_flight >= 1, "no kill landed while a batch was being written"
    # Each run's start swept the scratch folder of the run killed before it, with the temporary files its
    # JVM left there: only the last killed run's is left, until the next driver starts.
    left = [f for f in scratch_root().iterdir() if f not in scratch_before and f != scratch_dir()]
    assert len(left) == 1 and any(p.name.startswith(("blockmgr-", "spark-")) for p in left[0].iterdir()), left
    assert left[0] in sweep(scratch_root()) and not left[0].exists()
    final = cli(capsys, "run", "--available-now", "--spec", str(project.spec_path))  # in-process: no kill
    assert final.returncode == 0, final.stderr[-3000:]

    # Spark's view.
    bronze = spark.read.format("delta").load(project.table("bronze_events"))
    assert bronze.count() == EVENTS
    assert bronze.select("partition", "offset").distinct().count() == EVENTS

    # The independent reader's view, down to the event ids.
    table = DeltaTable(project.table("bronze_events")).to_pyarrow_table(
        columns=["partition", "offset", "value"])
    pairs = list(zip(table["partition"].to_pylist(), table["offset"].to_pylist(), strict=True))
    assert len(pairs) == len(set(pairs)) == EVENTS
    seen = sorted(json.loads(v)["event_id"] for v in table["value"].to_pylist())
    assert seen == ids
