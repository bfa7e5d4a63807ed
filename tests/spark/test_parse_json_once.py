"""A JSON column filtered on its fields is parsed once per row (io.deltaflow.sql.ParseJsonOnce), same rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deltaflow.runtime.session import session_settings

SCHEMA = "event_id STRING, user_id STRING, event_type STRING, revenue DOUBLE, at TIMESTAMP"
OFF = {"spark.deltaflow.optimizer.parseJsonOnce": "false"}
VALUES = [
    '{"event_id":"e1","user_id":"u1","event_type":"view","revenue":0.0,"at":"2025-05-01T12:00:00Z"}',
    '{"event_id":"e2","user_id":null,"event_type":"buy","revenue":9.5}',  # no user: filtered out
    '{"event_id":"e3","user_id":"u3","revenue":"not a number","event_type":"buy"}',  # a field of a bad type
    '{"event_id":"e4","user_id":"u4","event_type":"view"',  # cut short: malformed
    "not json at all",
    None,
    '{"event_id":"e7","user_id":"u7","event_type":"buy","revenue":1e3,"extra":{"a":[1,2]}}',
]


def silver(df: Any) -> Any:
    """The clickstream's silver shape: parse, expand, filter on two of the fields."""
    from pyspark.sql import functions as F

    return (df.select(F.from_json("value", SCHEMA).alias("e"), "offset").select("e.*", "offset")
            .where(F.col("event_type").isNotNull() & F.col("user_id").isNotNull()))


def parses(plan: Any) -> int:
    return str(plan.toString()).count("from_json(")


@pytest.fixture
def bronze(spark: Any) -> Any:
    return spark.createDataFrame(list(enumerate(VALUES)), "offset LONG, value STRING")


def test_a_filtered_json_column_is_parsed_once_and_gives_the_same_rows(spark: Any, bronze: Any) -> None:
    with session_settings(spark, OFF):  # Spark's own plan: the filter parses once per field it names
        plain = silver(bronze)
        assert parses(plain._jdf.queryExecution().optimizedPlan()) == 3
        expected = sorted(map(tuple, plain.collect()))
    once = silver(bronze)
    assert parses(once._jdf.queryExecution().optimizedPlan()) == 1
    assert sorted(map(tuple, once.collect())) == expected
    assert [r[0] for r in expected] == ["e1", "e3", "e7"]


def test_filters_on_the_whole_struct_and_on_other_columns_keep_their_rows(spark: Any, bronze: Any) -> None:
    from pyspark.sql import functions as F

    def query(df: Any) -> Any:
        parsed = df.select(F.from_json("value", SCHEMA).alias("e"), "offset", "value")
        return parsed.where(F.col("e").isNotNull() & (F.col("offset") > 0) & F.col("e.revenue").isNull()
                            & F.col("value").startswith("{"))

    with session_settings(spark, OFF):
        expected = sorted(map(str, query(bronze).collect()))
    once = query(bronze)
    assert parses(once._jdf.queryExecution().optimizedPlan()) == 1
    assert sorted(map(str, once.collect())) == expected


def test_each_micro_batch_of_a_stream_parses_once(spark: Any, bronze: Any, tmp_path: Path) -> None:
    source, sink = str(tmp_path / "bronze"), str(tmp_path / "silver")
    bronze.write.format("delta").save(source)
    query = (silver(spark.readStream.format("delta").load(source)).writeStream.format("delta")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start(sink))
    try:
        query.processAllAvailable()
        assert parses(query._jsq.streamingQuery().lastExecution().optimizedPlan()) == 1
    finally:
        query.stop()
    assert sorted(r.event_id for r in spark.read.format("delta").load(sink).collect()) == ["e1", "e3", "e7"]


def test_a_row_the_other_conditions_drop_is_never_parsed(spark: Any, bronze: Any) -> None:
    from pyspark.sql import functions as F

    def query(df: Any) -> Any:  # FAILFAST: parsing a malformed record fails the query
        parsed = df.select(F.from_json("value", SCHEMA, {"mode": "FAILFAST"}).alias("e"), "offset")
        return parsed.select("e.*", "offset").where((F.col("offset") < 2) & F.col("user_id").isNotNull())

    with session_settings(spark, OFF):
        expected = sorted(map(tuple, query(bronze).collect()))
    assert sorted(map(tuple, query(bronze).collect())) == expected  # rows 2-5 do not parse: never parsed
    assert [r[0] for r in expected] == ["e1"]
