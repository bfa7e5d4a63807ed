"""Spark Declarative Pipelines projects run unchanged under deltaflow (issue 41), and take deltaflow's extras.

* the project ``spark-pipelines init`` writes runs under ``deltaflow run --spec <dir>`` and its tables equal
  those SDP itself writes (``spark-pipelines run``, in a JVM of its own: the claim is about SDP);
* ``examples/sdp_orders`` (a bronze streaming table over a JSON folder, silver and gold materialized views,
  one SQL file) runs unchanged, dry-run and graph included, its gold equal to the orders computed here;
* one ``@deltaflow.expect_or_quarantine`` line above the SDP table quarantines the bad orders, and a
  continuous trigger in the spec runs bronze continuously;
* a SQL file's constraints drop, count, or fail, as declarative pipelines' SQL says.

Tables are read back with ``deltalake``.
"""

from __future__ import annotations

import json
import random
import shutil
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from deltaflow.dev.sample_data import order_events, write_json_lines
from deltaflow.dev.spark_pipelines import run_spark_pipelines, spark_pipelines_table
from deltaflow.pipeline import Pipeline
from helpers import cli, cli_env

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sdp_orders"


def rows(table: str, order_by: str) -> list[dict[str, Any]]:
    return sorted(DeltaTable(table).to_pyarrow_table().to_pylist(), key=lambda r: r[order_by])


def with_spec(root: Path, spec: str) -> Path:
    (root / "spark-pipeline.yml").write_text(spec)
    return root


def sdp_orders(tmp_path: Path, extra: str = "") -> tuple[Path, Path]:
    """A copy of ``examples/sdp_orders`` with absolute storage and landing paths; its landing folder."""
    project = tmp_path / "sdp_orders"
    shutil.copytree(EXAMPLE, project)
    landing = tmp_path / "landing"
    landing.mkdir()
    with_spec(project, f"name: sdp_orders\nstorage: file://{tmp_path / 'storage'}\nconfiguration:\n"
              f"  orders.landing: {landing}\nlibraries:\n  - glob:\n      include: transformations/**\n"
              f"{extra}")
    return project, landing


def drop(landing: Path, name: str, seed: int, count: int = 300) -> list[dict[str, Any]]:
    orders = order_events(random.Random(seed), datetime(2026, 11, 26, tzinfo=UTC), count, invalid_share=0.1)
    write_json_lines(landing, name, orders)
    return orders


def expected_sales(orders: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Gold, computed here: each valid order once, counted and summed per category."""
    valid = {o["order_id"]: o for o in orders if o["order_id"] is not None and o["amount"] > 0}
    sales: dict[str, list[float]] = defaultdict(list)
    for order in valid.values():
        sales[order["product_category"]].append(order["amount"])
    return sorted(({"product_category": c, "order_count": len(a), "revenue": round(sum(a), 2)}
                   for c, a in sales.items()), key=lambda r: r["product_category"])


def test_the_project_spark_pipelines_init_writes_runs_unchanged_with_sdps_tables(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, capsys, monkeypatch) -> None:
    from pyspark.pipelines.init_cli import init

    monkeypatch.chdir(tmp_path)
    init("hello")
    project = tmp_path / "hello"
    theirs = tmp_path / "sdp" / "hello"
    shutil.copytree(project, theirs)  # SDP on its own copy and storage: the same files, run by each
    spec = (theirs / "spark-pipeline.yml").read_text()
    (theirs / "spark-pipeline.yml").write_text(spec.replace(str(project), str(theirs)))

    # SDP's driver as the tests' own short-lived drivers run (C1 only: 20 s instead of 27), in a process of
    # its own while deltaflow runs the project in this one
    monkeypatch.setenv("JDK_JAVA_OPTIONS", cli_env()["JDK_JAVA_OPTIONS"])
    with ThreadPoolExecutor(1) as sdp:
        sdp_run = sdp.submit(run_spark_pipelines, theirs / "spark-pipeline.yml", tmp_path / "sdp",
                             metastore=False)
        ran = cli(capsys, "run", "--spec", str(project))
        done = sdp_run.result()
    assert ran.returncode == 0, ran.stderr
    assert "note:" not in ran.stderr, ran.stderr  # nothing in it runs differently
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]

    layout = Pipeline.load(project).layout
    for name in ("example_python_materialized_view", "example_sql_materialized_view"):
        ours = rows(layout.table(name), "id")
        assert ours and ours == rows(spark_pipelines_table(tmp_path / "sdp", name), "id"), name


def test_an_orders_pipeline_written_for_sdp_runs_unchanged(spark, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    project, landing = sdp_orders(tmp_path)
    orders = drop(landing, "1.json", seed=1)
    for verb in ("dry-run", "graph"):
        shown = cli(capsys, verb, "--spec", str(project))
        assert shown.returncode == 0, shown.stderr
        assert "sales_by_category" in shown.stdout and "orders_bronze" in shown.stdout, shown.stdout
    ran = cli(capsys, "run", "--spec", str(project))
    assert ran.returncode == 0, ran.stderr
    layout = Pipeline.load(project).layout
    assert len(rows(layout.table("orders_bronze"), "order_timestamp")) == len(orders)
    assert rows(layout.table("sales_by_category"), "product_category") == expected_sales(orders)

    more = drop(landing, "2.json", seed=2)
    assert cli(capsys, "run", "--spec", str(project)).returncode == 0
    assert len(rows(layout.table("orders_bronze"), "order_timestamp")) == len(orders) + len(more)
    assert rows(layout.table("sales_by_category"), "product_category") == expected_sales(orders + more)


def test_deltaflows_expectation_and_a_continuous_trigger_added_to_an_sdp_project(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, capsys) -> None:
    continuous = "trigger:\n  flows:\n    orders_bronze: {mode: continuous}\n"  # a deltaflow key
    project, landing = sdp_orders(tmp_path, extra=continuous)
    bronze = project / "transformations" / "orders_bronze.py"
    code = bronze.read_text().replace("from pyspark import pipelines as dp\n",
                                      "from pyspark import pipelines as dp\n\nimport deltaflow\n")
    bronze.write_text(code.replace('@dp.table(comment=', '@deltaflow.expect_or_quarantine("valid", '
                                   '"order_id IS NOT NULL AND amount > 0")\n@dp.table(comment='))
    orders = drop(landing, "1.json", seed=3)
    good = [o for o in orders if o["order_id"] is not None and o["amount"] > 0]

    pipeline = Pipeline.load(project, spark=spark)
    run = pipeline.start()
    assert run.trigger_of("orders_bronze").mode == "continuous"
    stop = threading.Event()
    watcher = threading.Thread(target=lambda: run.finish(stop))
    watcher.start()
    try:
        deadline = time.monotonic() + 120
        while not pipeline.layout.fs.exists(pipeline.layout.delta_log("orders_bronze_quarantine")) or len(
                rows(pipeline.layout.table("orders_bronze"), "order_timestamp")) < len(good):
            assert watcher.is_alive() and time.monotonic() < deadline, "bronze did not take in the orders"
            time.sleep(0.2)
        assert run.queries["orders_bronze"].isActive  # continuous: still running once it caught up
    finally:
        stop.set()
        watcher.join(timeout=120)
    layout = pipeline.layout
    assert len(rows(layout.table("orders_bronze"), "order_timestamp")) == len(good)
    assert DeltaTable(layout.table("orders_bronze_quarantine")).to_pyarrow_table().num_rows == len(
        orders) - len(good)


RAW_PY = """\
from pyspark import pipelines as dp

@dp.table
def raw():
    return spark.readStream.format("json").schema(
        "order_id STRING, amount DOUBLE").load(spark.conf.get("orders.landing"))
"""
CONSTRAINTS_SQL = """\
CREATE STREAMING TABLE checked (
  CONSTRAINT has_id EXPECT (order_id IS NOT NULL) ON VIOLATION DROP ROW,
  CONSTRAINT positive EXPECT (amount > 0)
) AS SELECT * FROM STREAM(raw);
"""


def test_sql_constraints_drop_and_count_rows_as_declarative_pipelines_sql_says(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, capsys) -> None:
    project, landing = sdp_orders(tmp_path)
    for old in (project / "transformations").iterdir():
        old.unlink()
    (project / "transformations" / "raw.py").write_text(RAW_PY)
    (project / "transformations" / "checked.sql").write_text(CONSTRAINTS_SQL)
    orders = drop(landing, "1.json", seed=4)
    ran = cli(capsys, "run", "--spec", str(project))
    assert ran.returncode == 0, ran.stderr
    layout = Pipeline.load(project).layout
    kept = DeltaTable(layout.table("checked")).to_pyarrow_table().to_pylist()
    assert sorted(r["order_id"] for r in kept) == sorted(o["order_id"] for o in orders if o["order_id"])
    shown = cli(capsys, "status", "--json", "--spec", str(project))
    checked = next(f for f in map(json.loads, shown.stdout.splitlines()) if f["flow"] == "checked")
    assert checked["dropped_rows"] == sum(1 for o in orders if o["order_id"] is None) > 0


@pytest.mark.parametrize("broken", ["SELECT order_id FROM orders_bronze WHERE amount >",
                                    "SELECT nope FROM orders_bronze"])
def test_a_sql_query_spark_refuses_is_one_line_at_its_file_and_line(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, capsys, broken: str) -> None:
    project, _ = sdp_orders(tmp_path)
    (project / "transformations" / "sales.sql").write_text(
        "-- gold\nCREATE MATERIALIZED VIEW sales_by_category AS\n" + broken)
    shown = cli(capsys, "dry-run", "--spec", str(project))
    assert shown.returncode != 0
    assert len(shown.stderr.strip().splitlines()) == 1, shown.stderr  # no log of Spark's, no stack
    assert "sales.sql:3" in shown.stderr and "DF-GRAPH" in shown.stderr, shown.stderr


VIEWS_SQL = """\
-- a temporary view in SQL, read by a SQL materialized view (partitioned) and a Python one
CREATE TEMPORARY VIEW valid_orders AS
SELECT order_id, product_category, amount FROM orders_bronze WHERE order_id IS NOT NULL AND amount > 0;

CREATE MATERIALIZED VIEW revenue_by_size
PARTITIONED BY (size)
AS SELECT CASE WHEN amount >= 100 THEN 'large' ELSE 'small' END AS size, product_category,
          count(*) AS order_count, round(sum(amount), 2) AS revenue
   FROM valid_orders GROUP BY 1, 2;
"""
VIEWS_PY = """\
from pyspark import pipelines as dp
from pyspark.sql import functions as F


@dp.materialized_view(partition_cols=["product_category"])
def big_orders():
    return spark.read.table("valid_orders").where(F.col("amount") >= 100)
"""


def test_a_sql_temporary_view_feeds_sql_and_python_views_which_keep_their_partitioning(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, capsys) -> None:
    project, landing = sdp_orders(tmp_path)
    (project / "transformations" / "views.sql").write_text(VIEWS_SQL)
    (project / "transformations" / "big.py").write_text(VIEWS_PY)
    layout = Pipeline.load(project).layout
    orders: list[dict[str, Any]] = []
    for round_, seed in enumerate((11, 12)):  # the second run refreshes the views from their drivers
        orders += drop(landing, f"{round_}.json", seed=seed)
        ran = cli(capsys, "run", "--available-now", "--spec", str(project))
        assert ran.returncode == 0, ran.stderr
        valid = [o for o in orders if o["order_id"] and o["amount"] > 0]
        sizes: dict[tuple[str, str], list[float]] = defaultdict(list)
        for o in valid:
            sizes["large" if o["amount"] >= 100 else "small", o["product_category"]].append(o["amount"])
        expected = sorted((s, c, len(a), round(sum(a), 2)) for (s, c), a in sizes.items())
        revenue = DeltaTable(layout.table("revenue_by_size"))
        got = sorted((r["size"], r["product_category"], r["order_count"], r["revenue"])
                     for r in revenue.to_pyarrow_table().to_pylist())
        assert got == expected
        big = DeltaTable(layout.table("big_orders"))
        assert sorted(r["order_id"] for r in big.to_pyarrow_table().to_pylist()) == sorted(
            o["order_id"] for o in valid if o["amount"] >= 100)
        assert revenue.metadata().partition_columns == ["size"]  # as SDP writes them
        assert big.metadata().partition_columns == ["product_category"]
