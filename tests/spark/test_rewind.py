"""Rewind: a bad definition ships, the fix ships, the table goes back; the result equals a clean run."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from deltalake import DeltaTable

import deltaflow.commands.rewind as rewind_module
from deltaflow.errors import ConfigError

DEFINITIONS = """
import deltaflow as dp
from pyspark.sql import functions as F

@dp.table
def bronze():
    return dp.read_files("landing", schema="sensor STRING, value DOUBLE")

@dp.table
@dp.expect_or_quarantine("in_range", "value < 100")
def silver():
    return dp.read_stream("bronze").select("sensor", (F.col("value") * {factor}).alias("value"))

@dp.table
def alerts():
    return dp.read_stream("silver").where("value > 30")

@dp.materialized_view
def gold():
    return dp.read("silver").groupBy("sensor").agg(F.count("*").alias("n"), F.sum("value").alias("total"))
"""
FIXED, BUGGY = DEFINITIONS.replace("{factor}", "1"), DEFINITIONS.replace("{factor}", "2")
DROPS = [[{"sensor": f"s{i % 3}", "value": float(10 * batch + i)} for i in range(6)] for batch in range(5)]
DROPS[1][0]["value"] = 60.0  # an alert, which the bug (x2) quarantines
DROPS[3][0]["value"] = 150.0  # quarantined by the fixed definition too


def rows(project: Any, table: str, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    data = DeltaTable(project.table(table)).to_pyarrow_table(columns=list(columns)).to_pylist()
    return sorted(tuple(str(r[c]) for c in columns) for r in data)


def tables(project: Any) -> dict[str, list[tuple[Any, ...]]]:
    return {"silver": rows(project, "silver", ("sensor", "value")),
            "alerts": rows(project, "alerts", ("sensor", "value")),
            "gold": rows(project, "gold", ("sensor", "n", "total")),
            "quarantine": rows(project, "silver_quarantine", ("record", "failed_expectations"))}


def use(project: Any, definitions: str) -> None:
    (project.root / "transformations" / "defs.py").write_text(definitions)


def test_interrupted_rewind_after_a_bad_definition_ends_clean(spark, make_project, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    clean = make_project(FIXED, name="clean")  # the fixed definition from the start (batching aside)
    for i, drop in enumerate(DROPS):
        clean.drop(f"{i}.json", drop)
    clean.run(spark)

    project = make_project(FIXED, name="rewound")
    project.drop("0.json", DROPS[0])
    project.run(spark)
    good = DeltaTable(project.table("silver")).version()
    use(project, BUGGY)  # two batches go through the bug: wrong values, wrong alerts, a wrong quarantine
    for i in (1, 2):
        project.drop(f"{i}.json", DROPS[i])
        project.run(spark)
    assert tables(project) != tables(clean)
    use(project, FIXED)
    for i in (3, 4):  # new input arrives while the bug is being fixed
        project.drop(f"{i}.json", DROPS[i])

    # The process dies after the checkpoint and the quarantine moved back, before the table is restored.
    layout, restore = project.layout, rewind_module._restore

    def dies_at_the_table(spark: Any, path: str, version: int) -> None:
        if path == project.table("silver"):
            raise KeyboardInterrupt
        restore(spark, path, version)

    monkeypatch.setattr(rewind_module, "_restore", dies_at_the_table)
    pipeline = project.pipeline(spark)
    with pytest.raises(KeyboardInterrupt):
        pipeline.rewind("silver", version=good)
    monkeypatch.undo()
    recorded = json.loads(layout.fs.read_text(layout.rewind_record("silver")) or "{}")
    assert [(f["flow"], f["batch"]) for f in recorded["flows"]] == [("silver", 0)]  # the batch of `good`
    assert set(recorded["rebuilt"]) == {"alerts", "gold"}
    assert layout.current_generation("silver", "silver") == 1

    messages: list[str] = []
    pipeline.run("available_now", on_message=messages.append)  # finishes the rewind, then batches 1..4
    assert f"silver: restored to version {good}" in messages
    assert not layout.fs.exists(layout.rewind_record("silver"))
    assert tables(project) == tables(clean)

    restored = next(v.version for v in pipeline.history("silver", 0) if v.operation == "RESTORE")
    latest = DeltaTable(project.table("silver")).version()
    refusals = [
        (dict(table="gold", version=0), "'gold' is a materialized view, not a streaming table"),
        (dict(table="silvr", version=0), "unknown table 'silvr' (did you mean 'silver'?)"),
        (dict(table="silver", version=latest), f"'silver' is at version {latest}; nothing to rewind"),
        (dict(table="silver", version=good), f"past version {restored}: a rewind replaced its rows there"),
    ]
    for arguments, message in refusals:
        with pytest.raises(ConfigError, match=re.escape(message)) as info:
            pipeline.rewind(**arguments)
        assert "\n" not in str(info.value)
