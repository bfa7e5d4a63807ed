"""``deltaflow history``: every version of a table, with the flow and micro-batch that wrote it (no JVM)."""

from __future__ import annotations

import json
from typing import Any

from deltalake import DeltaTable

from helpers import batch_ids, cli

PIPELINE = """
import deltaflow as dp

@dp.table
def events():
    return dp.read_files("landing", schema="id STRING, n INT")

dp.create_streaming_table("latest")
dp.create_auto_cdc_flow(target="latest", source="events", keys=["id"], sequence_by="n", name="upsert")
"""


def history(capsys: Any, project: Any, table: str, *args: str) -> list[dict[str, Any]]:
    shown = cli(capsys, "history", table, "--json", *args, "--spec", str(project.spec_path))
    assert shown.returncode == 0, shown.stderr
    return [json.loads(line) for line in shown.stdout.splitlines()]


def test_each_version_names_its_flow_and_batch(spark, make_project, capsys) -> None:  # type: ignore[no-untyped-def]
    project = make_project(PIPELINE)
    for i in range(3):
        project.drop(f"{i}.json", [{"id": f"k{j}", "n": i * 10 + j} for j in range(4 + i)])
        project.run(spark)
    spark.sql(f"OPTIMIZE delta.`{project.table('events')}`")

    # A plain append (stamped as Delta's streaming sink does): one version per batch, matched by its query id.
    events = history(capsys, project, "events", "--limit", "0")
    newest = DeltaTable(project.table("events")).version()
    assert [v["version"] for v in events] == list(range(newest, -1, -1))
    assert events[0]["operation"] == "OPTIMIZE" and events[0]["writer"] == "" and events[0]["flow"] is None
    assert events[0]["files_added"] == 1 and events[0]["files_removed"] == 3
    by_flow = [v for v in events if v["flow"] == "events"]
    committed = batch_ids(project.checkpoint("events") / "commits")
    assert sorted(v["batch_id"] for v in by_flow) == sorted(committed)
    assert sum(v["rows_inserted"] for v in by_flow) == 4 + 5 + 6 == spark.read.format("delta").load(
        project.table("events")).count()
    assert {v["writer"] for v in by_flow} == {f"flow 'events' batch {v['batch_id']}" for v in by_flow}

    # A MERGE (auto CDC): the transaction id deltaflow stamps names the flow, its checkpoint and batch.
    latest = history(capsys, project, "latest", "--limit", "2")
    assert len(latest) == 2 and all(v["operation"] == "MERGE" and v["flow"] == "upsert" for v in latest)
    assert [v["batch_id"] for v in latest] == [2, 1] and latest[0]["generation"] == 0
    assert latest[0]["rows_inserted"] == 1 and latest[0]["rows_updated"] == 5  # k5 new; k0-k4 updated

    shown = cli(capsys, "history", "latest", "--spec", str(project.spec_path))
    assert shown.returncode == 0 and "upsert #2" in shown.stdout and "MERGE" in shown.stdout


def test_an_unknown_table_is_one_line_naming_the_tables(make_project, capsys) -> None:  # type: ignore[no-untyped-def]
    project = make_project(PIPELINE)
    (project.storage / "tables").mkdir(parents=True)
    shown = cli(capsys, "history", "evnts", "--spec", str(project.spec_path))
    assert shown.returncode == 1 and len(shown.stderr.strip().splitlines()) <= 2
    assert "no table 'evnts'" in shown.stderr
