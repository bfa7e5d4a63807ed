"""deltaflow.sinks.state_store: stateful flows keep their state in RocksDB (changelog checkpointing), the
store recorded in the checkpoint; a restart restores it (a duplicate across runs is still dropped) from a
snapshot, not by replaying every change; a session that names its own store, or any of deltaflow's
settings for it, keeps them."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from deltalake import DeltaTable

from deltaflow.sinks.state_store import NO_DATA_BATCHES, PROVIDER, ROCKSDB, TUNING, state_store
from helpers import Project

DEFS = """
import deltaflow as dp

@dp.table
def events():
    return (dp.read_files("landing", schema="id STRING, ts TIMESTAMP")
            .withWatermark("ts", "1 hour").dropDuplicatesWithinWatermark(["id"]).drop("_corrupt_record"))
"""
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


def recorded_conf(project: Project) -> dict[str, str]:
    """The SQL settings Spark recorded with the flow's first batch (its offset log's metadata line)."""
    offsets = Path(project.checkpoint("events")) / "offsets" / "0"
    return dict(json.loads(offsets.read_text().splitlines()[1])["conf"])


def ids(project: Project) -> list[str]:
    return sorted(r["id"] for r in DeltaTable(project.table("events")).to_pyarrow_table().to_pylist())


def rows(*names: str) -> list[dict[str, object]]:
    return [{"id": n, "ts": "2026-11-26T10:00:00Z"} for n in names]


def test_a_stateful_flow_keeps_its_state_in_rocksdb_across_runs(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(DEFS)
    project.drop("1.json", rows("a", "b", "a"))
    project.run(spark)
    assert recorded_conf(project)[PROVIDER] == ROCKSDB
    state = Path(project.checkpoint("events")) / "state"
    assert list(state.rglob("1.changelog")), "a batch writes its changes, not a snapshot of the state"
    assert spark.conf.get(PROVIDER, None) is None  # the session is left as it was
    # The next run restores the state from the checkpoint: 'b' seen in the first run is dropped again.
    project.drop("2.json", rows("b", "c"))
    project.run(spark)
    assert ids(project) == ["a", "b", "c"]


def test_a_run_starts_from_the_snapshot_the_last_run_left_not_from_its_changes(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(DEFS)
    project.drop("1.json", rows("a", "b", "a"))
    project.run(spark)
    stores = [p for p in (project.checkpoint("events") / "state" / "0").iterdir() if p.name.isdigit()]

    def snapshotted(store: Path) -> bool:  # the store's last version has a snapshot in the checkpoint
        last = max(int(f.name.split(".")[0]) for f in store.glob("*.changelog"))
        return (store / f"{last}.zip").exists()

    deadline = time.monotonic() + 90  # uploaded by the executor's maintenance, every few seconds
    while not all(snapshotted(store) for store in stores):
        assert time.monotonic() < deadline, "the run's last state version was never snapshotted"
        time.sleep(0.1)
    project.drop("2.json", rows("b", "c"))
    run = project.pipeline(spark).start("available_now")
    run.finish(threading.Event())
    loads = [o.customMetrics for p in run.queries["events"].recentProgress for o in p.stateOperators]
    assert loads and all(m["rocksdbNumReplayChangelogFiles"] == 0 for m in loads)
    assert ids(project) == ["a", "b", "c"]


def test_a_session_naming_its_own_store_keeps_it(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(DEFS)
    project.drop("1.json", rows("a", "a"))
    spark.conf.set(PROVIDER, HDFS)
    try:
        project.run(spark)
    finally:
        spark.conf.unset(PROVIDER)
    assert recorded_conf(project)[PROVIDER] == HDFS
    assert ids(project) == ["a"]


def test_the_settings_a_session_names_are_kept_and_the_others_set_for_the_block(spark) -> None:  # type: ignore[no-untyped-def]
    named, *others = TUNING
    spark.conf.set(named, "mine")
    try:
        with state_store(spark, empty_batches=False):
            assert spark.conf.get(named) == "mine"
            assert [spark.conf.get(key) for key in (PROVIDER, *others, NO_DATA_BATCHES)] == \
                [ROCKSDB, *(TUNING[key] for key in others), "false"]
        assert spark.conf.get(named) == "mine"
        assert all(spark.conf.get(key, None) is None for key in (PROVIDER, *others, NO_DATA_BATCHES))
    finally:
        spark.conf.unset(named)
