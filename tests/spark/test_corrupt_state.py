"""Damaged state: repaired when provably safe, else one line naming the file; never a duplicate or a loss."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from deltaflow.errors import DeltaflowError
from deltaflow.runtime.refresh import FullRefresh
from helpers import Project

DEFS = """
import deltaflow as dp

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING, amount DOUBLE")

@dp.table
@dp.expect_or_quarantine("positive", "amount > 0")
def silver():
    return spark.readStream.table("bronze").select("id", "amount")
"""


def orders(prefix: str, count: int = 6) -> list[dict[str, Any]]:
    return [{"id": f"{prefix}{i}", "amount": float(i)} for i in range(count)]  # one in six not positive


def ids(project: Project, table: str) -> list[str]:
    rows = project.rows(table)
    return sorted(json.loads(r["record"])["id"] if "record" in r else r["id"] for r in rows)


def newest(folder: Path) -> Path:
    return max((f for f in folder.iterdir() if f.name.isdigit()), key=lambda f: int(f.name))


def started(spark: Any, make_project: Any) -> Project:
    project = make_project(DEFS)
    project.drop("1.json", orders("a"))
    project.run(spark)
    return project


def run(spark: Any, project: Project) -> tuple[list[Any], list[str]]:
    messages: list[str] = []
    outcomes = project.pipeline(spark).run("available_now", on_message=messages.append)
    return outcomes, messages


def test_what_can_be_repaired_safely_is_and_nothing_is_lost_or_doubled(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = started(spark, make_project)
    bronze, silver = project.checkpoint("bronze"), project.checkpoint("silver")
    # the newest commit entry of a batch that wrote its table: the batch replays, Delta skips its writes
    newest(bronze / "commits").write_text("garbage")
    # an offsets entry of a batch that never wrote anything: planned again
    (bronze / "offsets" / str(int(newest(bronze / "offsets").name) + 1)).write_text('v1\n{"batchWaterm')
    # the query id of a flow: found again in the event log and in the table's transaction record
    (silver / "metadata").unlink()
    # _last_checkpoint is only a hint
    DeltaTable(project.table("bronze")).create_checkpoint()
    (Path(project.table("bronze")) / "_delta_log" / "_last_checkpoint").write_text("{not json")

    project.drop("2.json", orders("b"))
    outcomes, messages = run(spark, project)
    assert {o.state for o in outcomes} == {"completed"}
    said = "\n".join(messages)
    for repair in ("removed the unreadable commits/0", "removed the unreadable offsets/1",
                   "removed its unreadable _delta_log/_last_checkpoint"):
        assert repair in said, said
    expected = sorted(o["id"] for o in orders("a") + orders("b"))
    assert ids(project, "bronze") == expected  # each row once
    assert sorted(ids(project, "silver") + ids(project, "silver_quarantine")) == expected
    assert (silver / "metadata").is_file()


def test_an_event_log_the_writer_cannot_open_costs_the_log_not_the_tables(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = started(spark, make_project)
    log = sorted((Path(project.layout.event_log) / "_delta_log").glob("*.json"))[-1]
    log.write_text(log.read_text()[:30])
    project.drop("2.json", orders("b"))
    outcomes, messages = run(spark, project)
    assert {o.state for o in outcomes} == {"completed"}
    assert any("warning: the event log" in m and "move its folder away" in m for m in messages), messages
    assert ids(project, "bronze") == sorted(o["id"] for o in orders("a") + orders("b"))


def _truncate(path: Path, keep: int = 25) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def _offsets(project: Project) -> Path:
    return newest(project.checkpoint("bronze") / "offsets")


def _commit(project: Project) -> Path:
    return sorted((Path(project.table("bronze")) / "_delta_log").glob("*.json"))[-1]


def _checkpoint(project: Project) -> Path:
    DeltaTable(project.table("bronze")).create_checkpoint()
    return next((Path(project.table("bronze")) / "_delta_log").glob("*.checkpoint.parquet"))


@pytest.mark.parametrize(("damaged", "says", "hint"), [
    (_offsets, "its checkpoint entry offsets/0 is unreadable and batch 0 already wrote its table",
     "--full-refresh bronze"),
    (_commit, "its Delta log file _delta_log/00000000000000000001.json is damaged", "restore the file"),
    (_checkpoint, "is damaged, so the table cannot be read", "--full-refresh bronze"),
])
def test_what_cannot_be_repaired_is_one_line_naming_the_file(  # type: ignore[no-untyped-def]
        spark, make_project, damaged, says: str, hint: str) -> None:
    project = started(spark, make_project)
    version = DeltaTable(project.table("silver")).version()
    path = damaged(project)
    _truncate(path)
    project.drop("2.json", orders("b"))
    with pytest.raises(DeltaflowError) as refused:
        run(spark, project)
    message = str(refused.value)
    assert says in message and hint in message and path.name in message and "\n" not in message.strip()
    assert DeltaTable(project.table("silver")).version() == version  # nothing written


def test_a_refresh_that_lost_its_staging_table_starts_again(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = started(spark, make_project)
    project.drop("2.json", orders("b"))
    project.run(spark)
    # a refresh of silver recorded, its flow's new generation already past two batches (as if it had
    # filled the staging table), and the staging table gone
    refresh = FullRefresh(project.layout, "silver")
    refresh.request({"silver": 1})
    shutil.rmtree(project.checkpoint("silver", generation=1))
    shutil.copytree(project.checkpoint("silver", generation=0), project.checkpoint("silver", generation=1))
    assert refresh.pending() and not Path(refresh.staging).exists()

    project.drop("3.json", orders("c"))
    outcomes, messages = run(spark, project)
    assert {o.state for o in outcomes} == {"completed"} and refresh.pending() is None
    assert any("silver: full refresh" in m for m in messages), messages
    # rebuilt from all of bronze: without starting again, the staging table would hold only 3.json's rows
    assert ids(project, "silver") == sorted(o["id"] for o in orders("a") + orders("b") + orders("c")
                                            if o["amount"] > 0)
