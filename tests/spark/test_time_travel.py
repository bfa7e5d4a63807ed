"""``dp.read(name, version=/timestamp=)``: a definition reads a table as it was."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from deltalake import DeltaTable

from deltaflow.errors import GraphError

BRONZE = """
import deltaflow as dp

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING")
"""
PIPELINE = BRONZE + """
@dp.materialized_view
def first_batch():
    return dp.read("bronze", version=1)

@dp.materialized_view
def as_of():
    return dp.read("bronze", timestamp=spark.conf.get("test.as_of"))
"""


def ids(project, table: str) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(DeltaTable(project.table(table)).to_pyarrow_table().column("id").to_pylist())


def test_a_definition_reads_a_table_as_of_a_version_or_a_time(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(BRONZE)
    for i in range(3):  # bronze versions 1, 2, 3: one file each
        project.drop(f"{i}.json", [{"id": f"a{i}"}, {"id": f"b{i}"}])
        project.pipeline(spark).run("available_now")
    (project.root / "transformations" / "defs.py").write_text(PIPELINE)  # the views come later
    pipeline = project.pipeline(spark)
    written = {h["version"]: h["timestamp"] for h in DeltaTable(project.table("bronze")).history()}
    # Between versions 2 and 3 (Delta dates a version by its log file, a moment after its commitInfo).
    between = (written[2] + written[3]) / 2000
    moment = datetime.fromtimestamp(between, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    spark.conf.set("test.as_of", moment)
    try:
        pipeline.run("available_now")
    finally:
        spark.conf.unset("test.as_of")
    assert ids(project, "first_batch") == ["a0", "b0"]
    assert ids(project, "as_of") == ["a0", "a1", "b0", "b1"]
    assert len(ids(project, "bronze")) == 6


@pytest.mark.parametrize(("read", "message"), [
    ('dp.read("bronze", version=1, timestamp="2026-01-01")', "as of a version and a timestamp; give one"),
    ('dp.read("raw", version=1)', "reads an earlier version of temporary view 'raw'"),
])
def test_a_time_travel_read_it_cannot_do_is_one_line_at_its_line(spark, make_project, read, message) -> None:  # type: ignore[no-untyped-def]
    project = make_project(f"""
import deltaflow as dp

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING")

@dp.temporary_view
def raw():
    return dp.read("bronze")

@dp.materialized_view
def old():
    return {read}
""")
    (project.root / "landing").mkdir()
    with pytest.raises(GraphError, match=message) as info:
        project.pipeline(spark).dry_run()
    assert "defs.py:14" in str(info.value) and "\n" not in str(info.value)
