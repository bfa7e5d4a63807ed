"""Table properties declared after a table exists hold on it from the next run: one SET TBLPROPERTIES."""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable

from deltaflow.errors import ConfigError
from deltaflow.runtime.run_plan import RunPlan
from helpers import cli

PIPELINE = """
from pyspark.sql import functions as F

import deltaflow as dp

@dp.table
def events():
    return dp.read_files("landing", schema="action STRING, amount INT")

@dp.materialized_view
def gold_actions():
    return spark.read.table("events").groupBy("action").agg(F.sum("amount").alias("amount"))
"""

CDF = "delta.enableChangeDataFeed"


def operations(project, table: str, since: int) -> list[str]:  # type: ignore[no-untyped-def]
    commits = sorted(DeltaTable(project.table(table)).history(), key=lambda c: c["version"])
    return [c["operation"] for c in commits if c["version"] > since]


def test_a_property_declared_later_is_set_on_the_existing_tables_once(spark, make_project, capsys) -> None:  # type: ignore[no-untyped-def]
    project = make_project(PIPELINE)
    project.drop("0.json", [{"action": "buy", "amount": 3}, {"action": "view", "amount": 0}])
    project.run(spark)
    with pytest.raises(ConfigError, match=r"table 'gold_actions' does not record its changes \(declare it in "
                       r"\S+defs.py:\d+: @dp.materialized_view\(table_properties=\{\"delta.enableChange"
                       r"DataFeed\": \"true\"\}\), or for every table, in deltaflow.yml: table_properties: "
                       r"\{delta.enableChangeDataFeed: \"true\"\}"):
        project.pipeline().changes("gold_actions")
    before = {t: DeltaTable(project.table(t)).version() for t in ("events", "gold_actions")}

    # declared in the spec, nothing new to read: the spec's change starts Spark, which sets the property
    with project.spec_path.open("a") as spec:
        spec.write('table_properties: {delta.enableChangeDataFeed: "true"}\n')
    assert project.pipeline().reason_to_start() == "the definitions or the spec changed since the last run"
    project.run(spark)
    for table, version in before.items():
        assert DeltaTable(project.table(table)).metadata().configuration == {CDF: "true"}
        assert operations(project, table, version) == ["SET TBLPROPERTIES"]
    enabled = {t: DeltaTable(project.table(t)).version() for t in before}

    # new input, the spec as it was: the property holds, so no commit sets it again; nor does a full
    # refresh, which keeps it (the view is replaced by its recomputed rows, its properties kept)
    project.drop("1.json", [{"action": "buy", "amount": 4}])
    assert project.pipeline().reason_to_start() is not None
    project.pipeline(spark).run(plan=RunPlan(full_refresh=frozenset({"gold_actions"})))
    assert all(DeltaTable(project.table(t)).metadata().configuration == {CDF: "true"} for t in before)
    assert operations(project, "events", enabled["events"]) == ["STREAMING UPDATE"]
    recomputed = operations(project, "gold_actions", enabled["gold_actions"])
    assert recomputed and set(recomputed) == {"WRITE"}

    # the change feed from where it began (that commit), the view's recomputes since
    shown = cli(capsys, "changes", "gold_actions", "--json", "--spec", str(project.spec_path))
    assert shown.returncode == 0, shown.stderr
    began = enabled["gold_actions"]
    assert shown.stderr.strip() == (f"change feed from version {began} (enabled then): versions 0 to "
                                    f"{began - 1} recorded no changes")
    rows = [json.loads(line) for line in shown.stdout.splitlines()]
    assert {r["_commit_version"] for r in rows} == set(range(began + 1, began + 1 + len(recomputed)))
    last = {(r["_change_type"], r["action"], r["amount"]) for r in rows if r["_commit_version"] == max(
        r["_commit_version"] for r in rows)}  # (the refresh recomputes first, then the new row's batch)
    assert last == {("delete", "buy", 3), ("delete", "view", 0), ("insert", "buy", 7), ("insert", "view", 0)}
