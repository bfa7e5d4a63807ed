"""Auto CDC and foreach-batch sinks under SIGKILL: nothing lost, nothing applied twice.

Each crash takes down the whole ``deltaflow run`` process group (Python driver and Spark JVM) at once.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_model import COLUMNS, replay, scd1, scd2
from deltaflow.storage import StorageLayout
from helpers import Project, batch_ids, cli, cli_env, in_flight, kill_group, wait_for

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "customers_cdc"

COUNTER = """
import os
import signal

from delta.tables import DeltaTable

import deltaflow as dp

@dp.foreach_batch_sink(name="counter")
def counter(df, batch_id):
    session = df.sparkSession
    increment = session.createDataFrame([(0, df.count())], "k INT, n BIGINT")
    (DeltaTable.forPath(session, {counter!r}).alias("t").merge(increment.alias("s"), "t.k = s.k")
     .whenMatchedUpdate(set={{"total": "t.total + s.n", "batches": "t.batches + 1"}}).execute())
    if os.path.exists({kill!r}):
        os.killpg(os.getpgrp(), signal.SIGKILL)  # after the MERGE's commit, before the checkpoint's

@dp.append_flow(target="counter")
def count_events():
    return dp.read_files("landing", schema="id STRING")
"""


@pytest.mark.usefixtures("spark")
def test_accumulating_merge_killed_between_its_commit_and_the_checkpoint_counts_once(  # type: ignore[no-untyped-def]
        spark, tmp_path, capsys) -> None:
    counter, kill = tmp_path / "counter", tmp_path / "kill"
    spark.createDataFrame([(0, 0, 0)], "k INT, total BIGINT, batches INT").write.format("delta").save(
        str(counter))
    project = Project(tmp_path / "p", COUNTER.format(counter=str(counter), kill=str(kill)))
    checkpoint = project.checkpoint("counter", "count_events")

    def state() -> tuple[int, int]:
        row = DeltaTable(str(counter)).to_pyarrow_table().to_pylist()[0]
        return row["total"], row["batches"]

    project.drop("1.json", [{"id": f"a{i}"} for i in range(7)])
    kill.touch()
    killed = subprocess.run([sys.executable, "-m", "deltaflow", "run", "--spec", str(project.spec_path),
                             "--available-now"], capture_output=True, text=True, env=cli_env(), timeout=600,
                            start_new_session=True)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert state() == (7, 1)                  # the MERGE committed ...
    assert in_flight(checkpoint) == {0}       # ... and the checkpoint did not: batch 0 will run again

    kill.unlink()  # the runs after the kill need no process of their own
    replay = cli(capsys, "run", "--spec", str(project.spec_path), "--available-now")
    assert replay.returncode == 0, replay.stderr[-2000:]
    assert state() == (7, 1)                  # replayed, and skipped by Delta: counted once
    assert batch_ids(checkpoint / "commits") == {0}

    project.drop("2.json", [{"id": f"b{i}"} for i in range(3)])
    assert cli(capsys, "run", "--spec", str(project.spec_path), "--available-now").returncode == 0
    assert state() == (10, 2)


#: Runs killed, each once a customers batch of its own began (every other one at a random moment after).
ROUNDS = 4


def table(storage: Path, name: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
    return DeltaTable(StorageLayout(str(storage)).table(name)).to_pyarrow_table(columns=columns).to_pylist()


def test_customers_cdc_example_matches_the_reference_model_across_sigkills(  # type: ignore[no-untyped-def]
        spark, kafka_bootstrap, tmp_path, capsys, monkeypatch) -> None:
    from deltaflow.dev.generator import field_key, produce
    from deltaflow.dev.sample_data import customer_changes
    from deltaflow.dev.topics import create_topic

    rng = random.Random(20261122)
    topic = f"customer-changes-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, partitions=3)
    storage = tmp_path / "storage"
    env = {**cli_env(), "DELTAFLOW_STORAGE": str(storage), "DELTAFLOW_KAFKA": kafka_bootstrap,
           "DELTAFLOW_TOPIC": topic}
    events = customer_changes(150, 3_000, seed=2026, disorder=40, duplicates=0.06, delete_share=0.12)
    checkpoint = Path(StorageLayout(str(storage)).checkpoint("customers", "customers", 0).path)
    command = [sys.executable, "-m", "deltaflow", "run", "--continuous", "--spec", str(EXAMPLE)]
    size = len(events) // ROUNDS + 1
    for attempt in range(ROUNDS):
        produce(kafka_bootstrap, topic, events[attempt * size:(attempt + 1) * size],
                key_fn=field_key("customer_id"))
        log = tmp_path / f"run-{attempt}.log"
        begun = batch_ids(checkpoint / "offsets")  # a batch the last kill left in flight is not this run's
        with log.open("wb") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
        try:
            wait_for(lambda before=begun: batch_ids(checkpoint / "offsets") - before, 240,  # type: ignore[misc]
                     "a customers batch of this run", proc, log)
            if attempt % 2:
                time.sleep(rng.uniform(0.0, 2.0))  # a random moment in the run
        finally:
            kill_group(proc)

    for name in ("DELTAFLOW_STORAGE", "DELTAFLOW_KAFKA", "DELTAFLOW_TOPIC"):
        monkeypatch.setenv(name, env[name])
    final = cli(capsys, "run", "--available-now", "--spec", str(EXAMPLE))  # in-process: no kill
    assert final.returncode == 0, final.stderr[-3000:]

    expected = sorted(scd1(events, "customer_id", COLUMNS).values(), key=lambda r: r["customer_id"])
    assert sorted(table(storage, "customers", COLUMNS), key=lambda r: r["customer_id"]) == expected
    history = table(storage, "customers_history", [*COLUMNS, "__START_AT", "__END_AT"])
    assert sorted(history, key=lambda r: (r["customer_id"], r["__START_AT"])) == scd2(
        events, "customer_id", COLUMNS)

    audit = table(storage, "customers_audit")
    changes = [(r["_commit_version"], r["_change_type"], r["customer_id"]) for r in audit]
    assert len(changes) == len(set(changes))  # each change once, whatever the kills
    assert replay(audit, "customer_id", COLUMNS) == expected
