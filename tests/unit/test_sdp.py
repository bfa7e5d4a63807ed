"""Spark Declarative Pipelines projects loaded by deltaflow, without Spark (issue 41): the spec, the
decorators of ``pyspark.pipelines`` and SQL files become deltaflow's graph; what deltaflow does differently
is a note naming the file and line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from deltaflow.define.expectations import expectations_of
from deltaflow.errors import ConfigError, GraphError
from deltaflow.pipeline import Pipeline
from deltaflow.sdp.sql import parse_sql
from deltaflow.spec import find_spec, load_spec

ORDERS_SQL = """\
-- the orders pipeline's silver and gold, in SQL
CREATE OR REFRESH STREAMING TABLE orders_silver (
  CONSTRAINT positive EXPECT (amount > 0) ON VIOLATION DROP ROW,
  CONSTRAINT has_customer EXPECT (customer IS NOT NULL) ON VIOLATION FAIL UPDATE,
  CONSTRAINT small EXPECT (amount < 1000)
) COMMENT 'orders, checked' TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')
AS SELECT order_id, customer, amount FROM STREAM(orders_bronze);

CREATE MATERIALIZED VIEW sales_by_customer
  USING parquet PARTITIONED BY (customer) CLUSTER BY (customer)
AS SELECT customer, sum(amount) AS total FROM orders_silver GROUP BY customer;

CREATE STREAMING TABLE all_orders;
CREATE FLOW copy_orders AS INSERT INTO all_orders BY NAME SELECT * FROM STREAM orders_bronze;
SET spark.sql.shuffle.partitions = 4;
"""

ORDERS_PY = """\
from pyspark import pipelines as dp
import deltaflow


@deltaflow.expect_or_quarantine("known_customer", "customer <> 'nobody'")
@dp.table(comment="raw orders", table_properties={"quality": "bronze"}, partition_cols=["day"])
def orders_bronze():
    return spark.readStream.format("json").load(spark.conf.get("orders.landing"))


@dp.materialized_view(name="top_customers", format="parquet", spark_conf={"spark.sql.ansi.enabled": "true"})
def top():
    return spark.read.table("sales_by_customer").orderBy("total").limit(10)


@dp.temporary_view
def recent():
    return spark.read.table("orders_silver")


dp.create_streaming_table("customers", schema="customer STRING, tier STRING")
dp.create_auto_cdc_flow(target="customers", source="orders_bronze", keys=["customer"], sequence_by="ts",
                        apply_as_deletes="op = 'DELETE'", except_column_list=["op"])
dp.create_sink("export", "delta", {"path": "/tmp/export"})
dp.create_sink("alerts", "kafka", {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "alerts"})


@dp.append_flow(target="export")
def to_export():
    return spark.readStream.table("orders_silver")


@dp.append_flow(target="alerts")
def to_alerts():
    return spark.readStream.table("orders_silver").selectExpr("to_json(struct(*)) AS value")
"""


def sdp_project(root: Path, spec: str = "") -> Path:
    (root / "transformations" / "sql").mkdir(parents=True)
    (root / "transformations" / "orders.py").write_text(ORDERS_PY)
    (root / "transformations" / "sql" / "orders.sql").write_text(ORDERS_SQL)
    (root / "spark-pipeline.yml").write_text(spec or textwrap.dedent(f"""\
        name: orders
        storage: file://{root}/pipeline-storage
        catalog: main
        database: sales
        configuration:
          orders.landing: {root}/landing
        libraries:
          - glob:
              include: transformations/**
        """))
    return root


def test_sql_statements_become_definitions_with_their_clauses_and_lines() -> None:
    silver, gold, table, flow, setting = parse_sql(ORDERS_SQL, "orders.sql")
    assert (silver.kind, silver.name, silver.line, silver.query_line) == ("table", "orders_silver", 2, 7)
    assert silver.query == "SELECT order_id, customer, amount FROM STREAM(orders_bronze)"
    assert [(c.name, c.condition, c.action) for c in silver.constraints] == [
        ("positive", "amount > 0", "drop"), ("has_customer", "customer IS NOT NULL", "fail"),
        ("small", "amount < 1000", "warn")]
    assert (silver.comment, silver.table_properties) == (
        "orders, checked", {"delta.enableChangeDataFeed": "true"})
    assert (gold.kind, gold.partition_cols, gold.cluster_by, gold.line) == (
        "materialized_view", ("customer",), ("customer",), 9)
    assert (table.kind, table.query) == ("table", None)
    assert (flow.kind, flow.target, flow.query) == (
        "flow", "all_orders", "SELECT * FROM STREAM orders_bronze")
    assert (setting.kind, setting.name, setting.query) == ("set", "spark.sql.shuffle.partitions", "4")


@pytest.mark.parametrize(("sql", "message"), [
    ("CREATE TABLE t AS SELECT 1", "expected STREAMING TABLE, MATERIALIZED VIEW"),
    ("CREATE MATERIALIZED VIEW v", "a materialized view needs AS <query>"),
    ("CREATE STREAMING TABLE s (CONSTRAINT c EXPECT (a > 0) ON VIOLATION EXPLODE) AS SELECT 1",
     "expected ON VIOLATION DROP ROW or ON VIOLATION FAIL UPDATE"),
    ("CREATE FLOW f AS INSERT INTO t SELECT 1", "expected BY NAME"),
    ("CREATE MATERIALIZED VIEW v LOCATION '/x' AS SELECT 1", "unexpected 'LOCATION'"),
])
def test_a_sql_statement_deltaflow_does_not_understand_is_one_line_at_its_file_and_line(
        sql: str, message: str) -> None:
    with pytest.raises(GraphError) as info:
        parse_sql(f"CREATE MATERIALIZED VIEW ok AS SELECT 1;\n\n{sql}", "defs.sql")
    assert str(info.value).startswith("DF-GRAPH defs.sql:3: ") and message in str(info.value), info.value
    assert "\n" not in str(info.value)


def test_an_sdp_spec_is_found_as_spark_pipelines_finds_it_and_read_in_deltaflows_terms(
        tmp_path: Path) -> None:
    root = sdp_project(tmp_path)
    assert find_spec(root) == root / "spark-pipeline.yml"
    assert find_spec(start=root / "transformations" / "sql") == root / "spark-pipeline.yml"
    spec = load_spec(root, env={})
    assert spec.storage_path == str(root / "pipeline-storage")
    assert spec.libraries == ["transformations/**/*"]
    assert spec.parameters == {"orders.landing": f"{root}/landing"}
    assert [n.split(": ", 1)[1].split(":")[0] for n in spec.notes] == ["catalog 'main'", "database 'sales'"]
    (root / "deltaflow.yml").write_text("name: mine\nstorage: s\n")
    assert find_spec(root) == root / "deltaflow.yml"  # deltaflow's own spec first


def test_an_sdp_database_is_where_the_tables_are_registered_when_a_metastore_is_named(tmp_path: Path) -> None:
    root = sdp_project(tmp_path)
    spec_file = root / "spark-pipeline.yml"
    spec_file.write_text(spec_file.read_text() + "metastore: {uri: thrift://127.0.0.1:9083}\n")
    spec = load_spec(root, env={})
    assert spec.metastore is not None
    assert (spec.metastore.uri, spec.metastore.database) == ("thrift://127.0.0.1:9083", "sales")
    assert [n.split(": ", 1)[1].split(":")[0] for n in spec.notes] == ["catalog 'main'"]


def test_a_libraries_entry_of_another_shape_is_a_config_error(tmp_path: Path) -> None:
    root = sdp_project(tmp_path, "name: o\nstorage: s\nlibraries: [{glob: {exclude: x}}]\n")
    with pytest.raises(ConfigError, match=r"libraries.0: expected a file pattern or \{glob: \{include"):
        load_spec(root, env={})


def test_sdp_definitions_and_sql_files_load_into_deltaflows_graph(tmp_path: Path) -> None:
    graph = Pipeline(load_spec(sdp_project(tmp_path), env={})).graph
    kinds = {name: d.kind for name, d in graph.datasets.items()}
    assert kinds == {"orders_bronze": "table", "top_customers": "materialized_view",
                     "recent": "temporary_view", "customers": "table", "export": "sink", "alerts": "sink",
                     "orders_silver": "table", "sales_by_customer": "materialized_view",
                     "all_orders": "table"}
    bronze = graph.datasets["orders_bronze"]
    assert (bronze.comment, dict(bronze.table_properties), bronze.partition_cols) == (
        "raw orders", {"quality": "bronze"}, ("day",))
    assert str(bronze.location).endswith("transformations/orders.py:6")  # its decorator's line, as SDP
    assert [e.name for e in expectations_of(graph.flows["orders_bronze"].func)] == ["known_customer"]
    assert graph.datasets["customers"].schema == "customer STRING, tier STRING"
    cdc = graph.flows["customers"].cdc
    assert cdc is not None and (cdc.keys, cdc.sequence_by, cdc.apply_as_deletes, cdc.except_column_list) == (
        ("customer",), ("ts",), "op = 'DELETE'", ("op",))
    assert graph.flows["to_export"].target == "export"
    assert graph.flows["copy_orders"].target == "all_orders"
    silver = graph.flows["orders_silver"]
    assert [(e.name, e.action) for e in expectations_of(silver.func)] == [
        ("positive", "drop"), ("has_customer", "fail"), ("small", "warn")]
    assert str(silver.location).endswith("orders.sql:2")
    assert graph.datasets["orders_silver"].table_properties == {"delta.enableChangeDataFeed": "true"}
    assert graph.datasets["sales_by_customer"].partition_cols == ("customer",)

    notes = "\n".join(graph.notes)
    for expected in ("catalog 'main'",
                     "orders.py:11: 'top_customers' is stored as a Delta table, not parquet",
                     "orders.py:11: spark_conf of flow 'top_customers' (spark.sql.ansi.enabled)",
                     "orders.sql:9: cluster_by of 'sales_by_customer': not applied",
                     "orders.sql:9: 'sales_by_customer' is stored as a Delta table, not parquet",
                     "orders.py:25: sink 'alerts' (kafka): each batch is written once per attempt",
                     "orders.sql:15: SET spark.sql.shuffle.partitions"):
        assert expected in notes, notes


def test_the_project_spark_pipelines_init_writes_loads_unchanged(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from pyspark.pipelines.init_cli import init

    monkeypatch.chdir(tmp_path)
    init("hello")
    graph = Pipeline(load_spec(tmp_path / "hello", env={})).graph
    assert {n: d.kind for n, d in graph.datasets.items()} == {
        "example_python_materialized_view": "materialized_view",
        "example_sql_materialized_view": "materialized_view"}
    assert not graph.notes


def test_a_definition_file_reads_the_configuration_at_module_level_as_sdp_lets_it(tmp_path: Path) -> None:
    root = sdp_project(tmp_path)
    module_level = 'LANDING = spark.conf.get("orders.landing")\nPARTS = spark.conf.get("x.parts", "4")\n'
    (root / "transformations" / "orders.py").write_text(ORDERS_PY.replace(
        "from pyspark import pipelines as dp\n", "from pyspark import pipelines as dp\n" + module_level, 1))
    assert "orders_bronze" in Pipeline(load_spec(root, env={})).graph.datasets  # loaded, without Spark

    (root / "transformations" / "orders.py").write_text('LANDING = spark.conf.get("orders.landng")\n')
    with pytest.raises(GraphError, match=r"orders\.py:1: spark\.conf\.get\('orders\.landng'\): no such key "
                       r"in the spec's configuration \(did you mean 'orders\.landing'\?\)"):
        Pipeline(load_spec(root, env={})).graph  # noqa: B018
