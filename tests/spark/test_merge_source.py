"""A MERGE source computed once by deltaflow: read as it is by MERGEs, computed again if a block is lost."""

from __future__ import annotations

from typing import Any

import pytest
from deltalake import DeltaTable

from deltaflow.sinks.merge_source import MATERIALIZE, on_materialized, release


def test_a_lost_block_of_the_copy_starts_the_write_again_and_nothing_else_does(spark: Any) -> None:
    df = spark.range(1000).selectExpr("id", "id * 2 AS double")
    attempts: list[str] = []

    def write(source: Any) -> int:
        attempts.append(spark.conf.get(MATERIALIZE))
        if len(attempts) == 1:
            release(source)  # what an executor lost with its disk does to the copy
        return int(source.count())

    assert on_materialized(df, write) == 1000
    assert attempts == ["none", "none"]  # the MERGEs inside read the copy as it is, on both attempts
    assert spark.conf.get(MATERIALIZE, None) is None  # and only inside

    def failing(source: Any) -> int:
        attempts.append("failed")
        raise ValueError("not a lost block")

    attempts.clear()
    with pytest.raises(ValueError, match="not a lost block"):
        on_materialized(df, failing)
    assert attempts == ["failed"]


def test_a_merge_on_the_copy_gives_what_a_merge_on_delta_s_own_copy_gives(
        spark: Any, tmp_path: Any) -> None:
    from delta.tables import DeltaTable as SparkDeltaTable

    def merge(path: str, source: Any) -> None:
        (SparkDeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.id = s.id")
         .whenMatchedUpdate(set={"v": "s.v"}).whenNotMatchedInsertAll().execute())

    source = spark.range(0, 200, 1, 4).selectExpr("id", "id * 10 AS v")
    for name in ("ours", "delta"):
        spark.range(0, 100).selectExpr("id", "0 AS v").write.format("delta").save(str(tmp_path / name))
    on_materialized(source, lambda copy: merge(str(tmp_path / "ours"), copy))
    merge(str(tmp_path / "delta"), source)

    def rows(name: str) -> list[tuple[int, int]]:
        table = DeltaTable(str(tmp_path / name))
        return sorted((r["id"], r["v"]) for r in table.to_pyarrow_table().to_pylist())

    assert rows("ours") == rows("delta") == [(i, i * 10) for i in range(200)]
