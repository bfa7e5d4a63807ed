"""Compaction beside a running pipeline, and the upkeep a run does itself: nothing lost, nothing twice."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from deltalake import DeltaTable

from cdc_model import COLUMNS, scd1
from cdc_project import CHANGES
from helpers import cli

PIPELINE = CHANGES + """
@dp.table
def audit():
    return dp.read_stream("changes").select("customer_id", "op", "seq")

dp.create_streaming_table("customers")
dp.create_auto_cdc_flow(target="customers", source="changes", keys=["customer_id"], sequence_by="seq",
                        apply_as_deletes="op = 'DELETE'", except_column_list=["op"])
"""


def rows(project: Any, table: str, columns: list[str]) -> list[dict[str, Any]]:
    return DeltaTable(project.table(table)).to_pyarrow_table(columns=columns).to_pylist()


def compactions(project: Any, table: str) -> list[dict[str, Any]]:
    return [h for h in DeltaTable(project.table(table)).history() if h["operation"] == "OPTIMIZE"]


def change_chunks(count: int, size: int) -> list[list[dict[str, Any]]]:
    """New customers per chunk, so each MERGE adds a file; every fourth also changes and deletes older ones.

    (A MERGE rewrites each file holding a key it updates: with an update in every batch, the table would
    stay one file.)
    """
    seq = iter(range(1, 1_000_000))

    def event(key: str, op: str) -> dict[str, Any]:
        return {"customer_id": key, "op": op, "seq": next(seq), "name": f"n{key}", "email": None,
                "tier": "gold", "city": "Oslo", "updated_at": None}

    chunks = []
    for i in range(count):
        chunk = [event(f"c{i}-{j}", "INSERT") for j in range(size)]
        if i % 4 == 3:
            chunk += [event(f"c{i - 3}-{j}", "UPDATE") for j in range(2)]
            chunk.append(event(f"c{i - 2}-{size - 1}", "DELETE"))
        chunks.append(chunk)
    return chunks


def await_rows(project: Any, table: str, count: int, timeout: float = 180.0) -> None:
    """Until the running pipeline has written ``count`` rows (or more) to ``table``."""
    deadline = time.monotonic() + timeout
    while len(rows(project, table, ["customer_id"])) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"the running pipeline did not write {count} rows to '{table}'")
        time.sleep(0.1)


def test_optimize_while_streams_write_and_read_loses_and_repeats_nothing(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(PIPELINE)
    chunks = change_chunks(12, 40)
    events = [e for chunk in chunks for e in chunk]
    project.drop("0.json", chunks[0])
    pipeline = project.pipeline(spark)
    run = pipeline.start("continuous")
    stop = threading.Event()
    watcher = threading.Thread(target=lambda: run.finish(stop))
    watcher.start()
    compacted: Counter[str] = Counter()
    try:
        for i, chunk in enumerate(chunks[1:], start=1):
            project.drop(f"{i}.json", chunk)
            if i % 3 == 0:  # compact the source, the CDC target and the reader while they take in chunk i
                for result in pipeline.optimize(["changes", "customers", "audit"]):
                    compacted[result.table] += result.files_removed
            await_rows(project, "audit", sum(map(len, chunks[:i + 1])))  # one batch per chunk
        await_rows(project, "customers", len(scd1(events, "customer_id", COLUMNS)))
    finally:
        stop.set()
        watcher.join(timeout=300)
    assert not watcher.is_alive()
    assert all(o.state != "failed" for o in run.outcomes(stopped=True))

    # Each table was really compacted while its writer and its stream reader ran...
    tables = ("changes", "customers", "audit")
    assert all(compacted[t] > 0 and compactions(project, t) for t in tables), compacted
    # ...and the reader took in every event once: the rewrite was never read as new rows.
    arrived = Counter((e["customer_id"], e["op"], e["seq"]) for e in events)
    audit = Counter(tuple(r.values()) for r in rows(project, "audit", ["customer_id", "op", "seq"]))
    assert audit == arrived
    by_key = {r["customer_id"]: r for r in rows(project, "customers", COLUMNS)}
    assert by_key == scd1(events, "customer_id", COLUMNS)


MEDALLION = """
import deltaflow as dp

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING, sensor STRING")

@dp.table
def silver():
    return dp.read_stream("bronze")
"""


def test_a_run_compacts_each_table_after_optimize_every_batches_counted_across_runs(spark, make_project,  # type: ignore[no-untyped-def]
                                                                                     capsys) -> None:
    project = make_project(MEDALLION, "maintenance:\n  optimize_every: 3\n  zorder: {silver: [sensor]}\n")
    pipeline = project.pipeline(spark)
    messages: list[str] = []
    for i in range(4):  # one batch per run: the count survives from run to run, through the log
        project.drop(f"{i}.json", [{"id": f"{i}-{j}", "sensor": f"s{j % 3}"} for j in range(5)])
        pipeline.run("available_now", on_message=messages.append)
        assert bool(compactions(project, "bronze")) == (i >= 2), (i, messages)
    assert "maintenance: compacted 'silver': 3 files into 1" in messages, messages
    [silver_compaction] = compactions(project, "silver")
    assert silver_compaction["operationParameters"]["zOrderBy"] == '["sensor"]'
    silver = rows(project, "silver", ["id"])
    assert sorted(r["id"] for r in silver) == sorted(f"{i}-{j}" for i in range(4) for j in range(5))

    bad = cli(capsys, "optimize", "silver", "--zorder", "sensr", "--spec", str(project.spec_path))
    assert bad.returncode == 2 and "no column 'sensr' (did you mean 'sensor'?)" in bad.stderr, bad.stderr
    done = cli(capsys, "optimize", "--spec", str(project.spec_path))
    assert done.returncode == 0 and "bronze: compacted 2 files into 1" in done.stdout, done.stdout
