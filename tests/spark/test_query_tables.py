"""`deltaflow show` / `sql` (delta-rs' engine, no JVM) answer what Spark answers over the same tables."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

PIPELINE = """
import deltaflow as dp
from pyspark.sql import functions as F

@dp.table(table_properties={"delta.enableDeletionVectors": "true"})
def orders():
    return dp.read_files("landing", schema="order_id STRING, customer STRING, amount DECIMAL(9,2), "
                                          "at TIMESTAMP, note STRING")

@dp.materialized_view(partition_cols=["tier"])
def spend():
    return (spark.read.table("orders").withColumn("tier", F.when(F.col("amount") >= 10, "high")
                                                  .otherwise("low"))
            .groupBy("customer", "tier").agg(F.sum("amount").alias("total"), F.count("*").alias("orders")))
"""

QUERIES = [
    "SELECT customer, count(*) AS n, sum(amount) AS total FROM orders GROUP BY customer",
    "SELECT o.order_id, s.tier FROM orders o JOIN spend s ON o.customer = s.customer WHERE o.amount > 5",
    "SELECT * FROM orders WHERE note IS NULL",
    "SELECT tier, max(total) AS most FROM spend GROUP BY tier",
]


def _plain(rows: list[Any]) -> list[tuple[Any, ...]]:
    """Rows comparable across engines: delta-rs' timestamps are UTC-aware, Spark's naive in the session's
    time zone (UTC here)."""
    def value(v: Any) -> Any:
        return v.astimezone(UTC).replace(tzinfo=None) if isinstance(v, datetime) and v.tzinfo else v

    return sorted((tuple(value(v) for v in r) for r in rows), key=repr)


def test_show_and_sql_answer_as_spark_does_deleted_rows_left_out(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(PIPELINE)
    project.drop("0.json", [
        {"order_id": f"o{i}", "customer": f"c{i % 4}", "amount": f"{i * 1.75:.2f}",
         "at": f"2026-12-0{1 + i % 3}T10:00:00Z", "note": None if i % 3 else f"n{i}"} for i in range(40)])
    pipeline = project.pipeline(spark)
    pipeline.run("available_now")
    path = project.table("orders")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE order_id IN ('o3', 'o7')")  # a deletion vector
    assert any(a.get("deletionVector") for a in _adds(spark, path)), "the delete wrote no deletion vector"
    for name in ("orders", "spend"):
        spark.read.format("delta").load(project.table(name)).createOrReplaceTempView(name)
    try:
        for query in QUERIES:
            assert _plain(pipeline.sql(query).rows) == _plain(spark.sql(query).collect()), query
        shown = pipeline.show("orders", limit=0, where="amount > 20")
        assert _plain(shown.rows) == _plain(spark.sql("SELECT * FROM orders WHERE amount > 20").collect())
        assert shown.columns == spark.table("orders").columns
        before = pipeline.show("orders", limit=0, version=_version(spark, path) - 1)
        assert len(before.rows) == 40 and len(pipeline.show("orders", limit=0).rows) == 38
    finally:
        for name in ("orders", "spend"):
            spark.catalog.dropTempView(name)
    totals = {r[0]: r[2] for r in pipeline.sql(QUERIES[0]).rows}
    assert isinstance(totals["c1"], Decimal)


def _adds(spark: Any, path: str) -> list[dict[str, Any]]:
    import json
    from pathlib import Path

    log = Path(path) / "_delta_log"
    return [json.loads(line)["add"] for f in sorted(log.glob("*.json")) for line in f.read_text().splitlines()
            if '"add"' in line]


def _version(spark: Any, path: str) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0]["version"])
