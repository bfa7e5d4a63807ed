"""Per-dataset definition fingerprints (issue 73, DESIGN rule 12), the record runs keep of them, and
``deltaflow plan``: all without a JVM."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from deltaflow.pipeline import Pipeline
from deltaflow.runtime.definition_changes import DefinitionChanges, read_definitions_record
from helpers import Project, cli

DEFS = '''
from pyspark.sql import functions as F

import deltaflow as dp

LIMIT = 100


def big(column):
    return F.col(column) > LIMIT


@dp.table
def bronze():
    return dp.read_files(dp.parameter("landing"), format="json", schema="id STRING, amount DOUBLE")


@dp.table
def silver():
    return spark.readStream.table("bronze").withColumn("big", big("amount"))  # flagged


@dp.temporary_view
def recent():
    return spark.read.table("silver")


@dp.materialized_view
def gold():
    return spark.read.table("recent").groupBy("big").count()
'''

SQL = """CREATE MATERIALIZED VIEW gold_sql AS
SELECT big, count(*) AS n FROM silver GROUP BY big;
"""

PARAMS = "configuration:\n  landing: landing\n  other: x\n"


@pytest.fixture
def shop(make_project: Callable[..., Project]) -> Project:
    project = make_project(DEFS, PARAMS)
    (project.root / "transformations" / "gold.sql").write_text(SQL)
    spec = project.spec_path.read_text().replace("transformations/*.py", "transformations/*")
    project.spec_path.write_text(spec)
    return project


def prints(project: Project) -> dict[str, str]:
    return Pipeline.load(project.spec_path).graph.fingerprints


def edit(project: Project, old: str, new: str, file: str = "defs.py") -> None:
    path = project.root / "transformations" / file
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {name for name in after if before.get(name) != after[name]}


def test_the_same_definitions_give_the_same_fingerprints_anywhere(shop: Project, tmp_path: Path) -> None:
    first = prints(shop)
    assert set(first) == {"bronze", "silver", "recent", "gold", "gold_sql"}
    assert all(len(digest) == 64 for digest in first.values())
    assert prints(shop) == first  # loaded again
    copy = tmp_path / "elsewhere" / "shop"
    shutil.copytree(shop.root, copy)
    assert Pipeline.load(copy).graph.fingerprints == first  # another folder: no absolute path in it
    code = ("import json; from deltaflow.pipeline import Pipeline; "
            f"print(json.dumps(Pipeline.load({str(copy)!r}).graph.fingerprints))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert json.loads(other.stdout) == first  # another process, another hash seed


def test_comments_spacing_and_moving_a_definition_change_nothing(shop: Project) -> None:
    before = prints(shop)
    edit(shop, "  # flagged", "  # flagged as big")
    edit(shop, 'withColumn("big", big("amount"))', 'withColumn("big",  big( "amount" ))')
    edit(shop, "LIMIT = 100\n", "LIMIT = 100\n\n\n# the threshold of a big order\n")
    edit(shop, "SELECT big, count(*) AS n FROM", "SELECT  big,\n       count(*)   AS n\nFROM", "gold.sql")
    edit(shop, "FROM silver GROUP BY big;", "FROM silver\n  GROUP BY big ;", "gold.sql")
    assert prints(shop) == before


@pytest.mark.parametrize(("old", "new", "file", "expected"), [
    ("LIMIT = 100", "LIMIT = 200", "defs.py", {"silver"}),  # a constant its helper reads
    ("F.col(column) > LIMIT", "F.col(column) >= LIMIT", "defs.py", {"silver"}),  # the helper itself
    ('groupBy("big").count()', 'groupBy("big").count().where("count > 1")', "defs.py", {"gold"}),
    ('spark.read.table("silver")', 'spark.read.table("silver").where("big")', "defs.py", {"recent", "gold"}),
    ("count(*) AS n", "count(*) AS rows", "gold.sql", {"gold_sql"}),  # the SQL
])
def test_a_change_changes_the_fingerprints_of_what_it_builds(shop: Project, old: str, new: str, file: str,
                                                             expected: set[str]) -> None:
    before = prints(shop)
    edit(shop, old, new, file)
    assert changed(before, prints(shop)) == expected


def test_a_parameter_counts_for_the_datasets_that_read_it(shop: Project) -> None:
    before = prints(shop)
    shop.spec_path.write_text(shop.spec_path.read_text().replace("other: x", "other: y"))
    assert prints(shop) == before  # no dataset reads 'other'
    shop.spec_path.write_text(shop.spec_path.read_text().replace("landing: landing", "landing: drops"))
    assert changed(before, prints(shop)) == {"bronze"}


def test_declarations_and_expectations_count(shop: Project) -> None:
    before = prints(shop)
    edit(shop, "@dp.table\ndef silver", "@dp.table(merge_schema=True)\ndef silver")
    edit(shop, "@dp.table\ndef bronze", "@dp.table\n@dp.expect_or_quarantine('has_id', 'id IS NOT NULL')\n"
         "def bronze")
    assert changed(before, prints(shop)) == {"bronze", "silver"}


def test_a_table_property_is_not_a_changed_definition(shop: Project) -> None:
    """It is set on the table in place by the next run (deltaflow.properties): nothing to rebuild."""
    before = prints(shop)
    edit(shop, "@dp.materialized_view\ndef gold",
         "@dp.materialized_view(table_properties={'delta.enableChangeDataFeed': 'true'})\ndef gold")
    assert prints(shop) == before
    edit(shop, "table_properties={'delta.enableChangeDataFeed': 'true'})",
         "table_properties={'delta.enableChangeDataFeed': 'true'}, comment='Counts')")
    assert changed(before, prints(shop)) == {"gold"}


def test_a_run_records_what_it_ran_and_the_next_compares(shop: Project) -> None:
    pipeline = Pipeline.load(shop.spec_path)
    layout, graph = pipeline.layout, pipeline.graph
    first = DefinitionChanges.since_last_run(layout, graph, pipeline.spec)
    assert first.recorded is None and first.changed == [] and first.messages(graph.datasets) == []
    said: list[str] = []
    first.record(layout, {"bronze", "silver", "gold", "gold_sql"}, (), said.append)
    assert said == []  # a first run reports nothing changed
    record = read_definitions_record(layout)
    assert record is not None and record["datasets"]["gold"]["fingerprint"] == graph.fingerprints["gold"]

    edit(shop, 'groupBy("big").count()', 'groupBy("big").agg(F.count("*").alias("n"))')
    edit(shop, '"big", big("amount"))', '"big", big("amount")).withColumn("x", F.lit(1))')
    again = Pipeline.load(shop.spec_path)
    changes = DefinitionChanges.since_last_run(layout, again.graph, again.spec)
    assert changes.changed == ["gold", "silver"]
    assert changes.views({"bronze", "silver", "gold"}) == {"gold"}
    assert changes.messages({"bronze", "silver"}) == [
        "silver: definition changed: rows written before keep the old definition; "
        "deltaflow run --full-refresh silver rebuilds them"]
    assert changes.messages({"gold"}, planned=True) == [
        "gold: definition changed: the next run rebuilds it in full"]
    assert again.definition_notes() == [
        "gold: definition changed: the next run rebuilds it in full",
        "silver: definition changed: rows written before keep the old definition; "
        "deltaflow run --full-refresh silver rebuilds them"]
    said.clear()
    changes.record(layout, {"bronze", "silver"}, (), said.append)  # a part of the pipeline ran (--refresh)
    assert said == [changes.messages({"silver"})[0]]
    after = DefinitionChanges.since_last_run(layout, again.graph, again.spec)
    assert after.changed == ["gold"]  # not run: still to be rebuilt
    said.clear()
    after.record(layout, set(again.graph.datasets), {"gold"}, said.append)
    assert said == ["gold: definition changed: rebuilt in full"]
    written = Path(layout.definitions_record).stat().st_mtime_ns
    last = DefinitionChanges.since_last_run(layout, again.graph, again.spec)
    assert last.changed == []
    last.record(layout, set(again.graph.datasets), (), said.append)
    assert Path(layout.definitions_record).stat().st_mtime_ns == written  # nothing new: nothing written


def test_a_changed_definition_starts_spark_even_when_the_files_did_not_change(shop: Project) -> None:
    from deltaflow.runtime.nothing_new import new_input

    pipeline = Pipeline.load(shop.spec_path)
    layout, graph = pipeline.layout, pipeline.graph
    layout.fs.write_text(layout.graph_record, json.dumps({"fingerprint": pipeline.fingerprint()}))
    recorded = {n: {"kind": d.kind, "fingerprint": "0" * 64 if n == "gold" else graph.fingerprints[n]}
                for n, d in graph.datasets.items()}  # gold built by another definition (a helper module's)
    layout.fs.write_text(layout.definitions_record, json.dumps({"datasets": recorded}))
    flows = list(graph.flows.values())
    reason = new_input(pipeline.spec, layout, graph, flows, pipeline.fingerprint()).reason
    assert reason == "the definition of 'gold' changed since the last run"
    whole = pipeline.fingerprint()
    edit(shop, "LIMIT = 100", "LIMIT = 1")  # a definition file changed: the whole digest says so first
    assert Pipeline.load(shop.spec_path).fingerprint() != whole


def test_plan_says_what_changed_and_what_the_next_run_does(shop: Project, capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    pipeline = Pipeline.load(shop.spec_path)
    never = pipeline.plan()
    assert never.recorded_at is None
    assert {(d.dataset, d.definition, d.action) for d in never.datasets} == {
        ("bronze", "new", "refresh"), ("silver", "new", "refresh"), ("recent", "new", "none"),
        ("gold", "new", "refresh"), ("gold_sql", "new", "refresh")}
    runs = {n for n, d in pipeline.graph.datasets.items() if d.runs}
    DefinitionChanges.since_last_run(pipeline.layout, pipeline.graph, pipeline.spec).record(
        pipeline.layout, runs, (), print)
    recorded = Path(pipeline.layout.definitions_record).read_text()
    # what reads what, as a run records it
    reads = {"silver": "bronze", "gold_sql": "silver", "gold": "silver"}
    graph = {"datasets": [{"dataset": d, "flows": [{"flow": d, "inputs": {up: "stream"}}]}
                          for d, up in reads.items()]}
    pipeline.layout.fs.write_text(pipeline.layout.graph_record, json.dumps(graph))
    edit(shop, '"big", big("amount"))', '"big", big("amount")).withColumn("x", F.lit(1))')
    edit(shop, "count(*) AS n", "count(*) AS rows", "gold.sql")
    edit(shop, "@dp.materialized_view\ndef gold():", "@dp.materialized_view\ndef gold2():")

    result = cli(capsys, "plan", "--spec", str(shop.spec_path), "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    states = {d["dataset"]: (d["definition"], d["action"]) for d in plan["datasets"]}
    assert states == {"bronze": ("unchanged", "refresh"), "silver": ("changed", "refresh"),
                      "recent": ("unchanged", "none"), "gold2": ("new", "refresh"),
                      "gold_sql": ("changed", "rebuild in full"), "gold": ("removed", "none")}
    why = {d["dataset"]: d["why"] for d in plan["datasets"]}
    assert why["gold_sql"] == "definition changed"
    assert why["bronze"].startswith("the event log cannot be read")  # never ran: not known to be quiet
    assert plan["notes"] == ["silver: definition changed: rows written before keep the old definition; "
                             "deltaflow run --full-refresh silver rebuilds them"]
    text = cli(capsys, "plan", "--spec", str(shop.spec_path))
    assert "  rebuild in full: gold_sql (definition changed)" in text.stdout
    assert "  removed:   gold (materialized view)" in text.stdout
    assert "plan: nothing was written" in text.stderr
    assert Path(pipeline.layout.definitions_record).read_text() == recorded  # nothing written
    quiet = Pipeline.load(shop.spec_path)
    assert quiet.plan().doing("rebuild in full")[0].dataset == "gold_sql"
    assert quiet._spark is None  # no JVM
