"""Rewind: a bad definition ships, the fix ships, the table goes back; the result equals a clean run."""

from __future__ import annotations

from typing import Any

import re

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


@pytest.mark.parametrize("interrupted", [False, True])
def test_rewind_after_a_bad_definition_equals_a_clean_run(spark, make_project, monkeypatch, interrupted) -> None:  # type: ignore[no-untyped-def]
    clean = make_project(FIXED, name="clean")
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
    project.drop("3.json", DROPS[3])  # new input arrives while the bug is being fixed

    pipeline = project.pipeline(spark)
    if interrupted:  # the process dies after the checkpoints moved, before the table is restored
        restore = rewind_module._restore

        def dies_at_the_table(spark: Any, path: str, version: int) -> None:
            if path == project.table("silver"):
                raise KeyboardInterrupt
            restore(spark, path, version)

        monkeypatch.setattr(rewind_module, "_restore", dies_at_the_table)
        with pytest.raises(KeyboardInterrupt):
            pipeline.rewind("silver", version=good)
        monkeypatch.undo()
        assert project.layout.fs.exists(project.layout.rewind_record("silver"))
    else:
        rewind = pipeline.rewind("silver", version=good)
        assert [(f.flow, f.batch) for f in rewind.flows] == [("silver", 0)]
        assert set(rewind.rebuilt) == {"alerts", "gold"}
        assert DeltaTable(project.table("silver")).version() > good  # the RESTORE is a new version

    project.run(spark)  # finishes an interrupted rewind, then runs batches 1..3 through the fix
    project.drop("4.json", DROPS[4])
    project.run(spark)  # and the pipeline goes on from there
    assert not project.layout.fs.exists(project.layout.rewind_record("silver"))
    assert tables(project) == tables(clean)


def test_rewind_refuses_what_it_cannot_do_in_one_line(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(FIXED)
    for i in (0, 1):
        project.drop(f"{i}.json", DROPS[i])
        project.run(spark)
    pipeline = project.pipeline(spark)
    latest = DeltaTable(project.table("silver")).version()
    refusals = [
        (dict(table="gold", version=0), "'gold' is a materialized view, not a streaming table"),
        (dict(table="silvr", version=0), "unknown table 'silvr' (did you mean 'silver'?)"),
        (dict(table="silver", version=latest), f"'silver' is at version {latest}; nothing to rewind"),
    ]
    for arguments, message in refusals:
        with pytest.raises(ConfigError, match=re.escape(message)) as info:
            pipeline.rewind(**arguments)
        assert "\n" not in str(info.value)
    pipeline.rewind("silver", version=latest - 1)
    restored = DeltaTable(project.table("silver")).version()
    with pytest.raises(ConfigError, match=f"past version {restored}: a rewind replaced its rows there"):
        pipeline.rewind("silver", version=latest - 2)
