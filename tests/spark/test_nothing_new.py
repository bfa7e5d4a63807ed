"""A run with nothing new ends before any query starts; anything new, or anything to finish, starts them."""

from __future__ import annotations

from pathlib import Path

from deltalake import DeltaTable

from deltaflow.commands.status import read_events
from deltaflow.runtime.nothing_new import SMALL_RUN_BYTES, NewInput
from deltaflow.runtime.run_plan import RunPlan
from helpers import Project

DEFS = """
import deltaflow as dp
from pyspark.sql import functions as F

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING, n BIGINT")

@dp.table
def silver():
    return spark.readStream.table("bronze").where("n > 0")

@dp.materialized_view
def totals():
    return spark.read.table("silver").agg(F.count("id").alias("rows"), F.sum("n").alias("n"))
"""
TABLES = ("bronze", "silver", "totals")


def reason(project: Project, spark: object) -> str | None:
    return project.pipeline(spark).reason_to_start("available_now")  # type: ignore[arg-type]


def events(project: Project) -> list[dict[str, object]]:
    return read_events(project.layout, "test", ["run_id", "flow", "kind", "end_time"])


def versions(project: Project) -> dict[str, int]:
    return {t: DeltaTable(project.table(t)).version() for t in TABLES}


def orders(name: str, count: int) -> list[dict[str, object]]:
    return [{"id": f"{name}-{i}", "n": i} for i in range(count)]


def test_nothing_new_starts_no_query_and_whatever_is_new_is_read_once(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project: Project = make_project(DEFS)
    project.drop("0.json", orders("a", 10))
    assert reason(project, spark) == "the definitions or the spec changed since the last run"
    project.run(spark)
    assert reason(project, spark) is None

    before, runs = versions(project), {r["run_id"] for r in events(project)}
    messages: list[str] = []
    outcomes = project.pipeline(spark).run("available_now", on_message=messages.append)
    assert [(o.flow, o.state) for o in outcomes] == [(t, "completed") for t in TABLES]
    assert messages == ["nothing new since the last run: no flow started, Spark not started"]
    assert versions(project) == before
    ended = [r for r in events(project) if r["run_id"] not in runs]
    assert sorted((r["flow"], r["kind"]) for r in ended) == [(t, "completed") for t in TABLES]

    # a new file: bronze reads it; then silver has a new bronze version to read
    project.drop("1.json", orders("b", 5))
    assert reason(project, spark) == f"flow 'bronze': 1 new file(s) in {project.root / 'landing'}"
    news = project.pipeline(spark).new_input("available_now")  # type: ignore[arg-type]
    size = (project.root / "landing" / "1.json").stat().st_size
    assert (news.file_bytes, news.kafka_records, news.small) == (size, 0, True)
    news = NewInput("more", SMALL_RUN_BYTES + 1, 0)
    assert not news.small and not news.plus(NewInput(None, None, 0)).small  # too much, or not known
    # bronze alone (silver, written from bronze's batches so far, goes on alone from where it stood)
    project.pipeline(spark).run("available_now", plan=RunPlan(refresh=frozenset({"bronze"})))
    assert reason(project, spark) == "flow 'silver': bronze has new versions"
    project.pipeline(spark).run("available_now", plan=RunPlan(refresh=frozenset({"silver"})))
    assert (found := reason(project, spark)) and found.startswith("flow 'totals': table ")
    assert found.endswith("silver has new versions")
    news = project.pipeline(spark).new_input("available_now")  # type: ignore[arg-type]
    assert (news.file_bytes, news.small) == (None, False)  # what a table holds unread is not measured
    project.run(spark)
    assert reason(project, spark) is None

    # a batch in flight (killed between the tables' commits and the checkpoint's) is replayed, once
    project.drop("2.json", orders("c", 5))
    project.pipeline(spark).run("available_now", plan=RunPlan(refresh=frozenset({"bronze", "silver"})))
    position = project.layout.position("silver", "silver")  # bronze's: silver had caught up, and joined it
    assert position.flow == "bronze"
    commits = Path(position.path) / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    assert reason(project, spark) == "flow 'bronze': a batch in flight"
    project.run(spark)
    silver = sorted(r["id"] for r in project.rows("silver"))
    every = sorted(o["id"] for name, count in (("a", 10), ("b", 5), ("c", 5)) for o in orders(name, count)
                   if o["n"] > 0)  # type: ignore[operator]
    assert silver == every  # nothing lost, nothing twice
    assert project.rows("totals") == [{"rows": len(every), "n": sum(int(i.rsplit("-")[1]) for i in every)}]

    # a changed definition file: the next run starts the queries (they resolve it), the one after does not
    defs = project.root / "transformations" / "defs.py"
    defs.write_text(defs.read_text() + "\n# a comment\n")
    assert reason(project, spark) == "the definitions or the spec changed since the last run"
    project.run(spark)
    assert reason(project, spark) is None
