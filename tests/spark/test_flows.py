"""Several flows into one streaming table, and Delta source options reaching the source."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection

from deltalake import DeltaTable

from deltaflow.pipeline import Pipeline
from deltaflow.runtime.run_plan import RunPlan
from deltaflow.runtime.runner import PipelineRun
from deltaflow.spec import load_spec

APPEND_FLOWS = """
import deltaflow as dp

dp.create_streaming_table("all_orders", schema="id STRING, channel STRING", comment="every channel")

@dp.append_flow(target="all_orders")
def web():
    return dp.read_files("web", schema="id STRING").selectExpr("id", "'web' AS channel")

@dp.append_flow(target="all_orders", name="shop")
def anything():
    return dp.read_files("shop", schema="id STRING").selectExpr("id", "'shop' AS channel")

@dp.table
def throttled():
    return spark.readStream.option("maxFilesPerTrigger", 1).table("all_orders")
"""


def run(spark, project, plan: RunPlan | None = None) -> PipelineRun:  # type: ignore[no-untyped-def]
    spec = load_spec(project.spec_path)
    pipeline = Pipeline(spec, spark=spark).start("available_now", plan=plan)
    pipeline.finish(threading.Event())
    return pipeline


def rows(project, table: str) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    table_rows = DeltaTable(project.table(table)).to_pyarrow_table().to_pylist()
    return sorted((r["id"], r["channel"]) for r in table_rows)


def test_append_flows_feed_one_table_each_from_its_own_checkpoint(spark, make_project) -> None:
    project = make_project(APPEND_FLOWS)
    project.drop("1.json", [{"id": i} for i in ["w1", "w2"]], folder="web")
    project.drop("1.json", [{"id": i} for i in ["s1"]], folder="shop")
    first = run(spark, project)
    project.drop("2.json", [{"id": i} for i in ["w3"]], folder="web")
    second = run(spark, project)

    expected = [("s1", "shop"), ("w1", "web"), ("w2", "web"), ("w3", "web")]
    assert rows(project, "all_orders") == expected
    assert DeltaTable(project.table("all_orders")).metadata().description == "every channel"
    for flow in ("web", "shop"):
        assert (project.checkpoint("all_orders", flow) / "offsets").is_dir()
    # maxFilesPerTrigger=1 reached Delta's source: one micro-batch per all_orders commit
    batches = [p for p in first.queries["throttled"].recentProgress if p.numInputRows]
    assert len(batches) == 2  # the web and shop commits of the first run
    assert [p.numInputRows for p in second.queries["throttled"].recentProgress if p.numInputRows] == [1]
    assert rows(project, "throttled") == expected

    # a full refresh rebuilds the table from both flows, and its reader from scratch
    run(spark, project, RunPlan(full_refresh=frozenset({"all_orders"})))
    assert rows(project, "all_orders") == expected
    assert rows(project, "throttled") == expected
    for flow in ("web", "shop"):
        assert (project.checkpoint("all_orders", flow, generation=1) / "offsets").is_dir()


UDFS = """
import deltaflow as dp
from pyspark.sql import functions as F

DOMAIN_MARK = "#masked"


def mask(email):  # a plain function of this file, called by the UDFs below
    user, _, domain = email.partition("@")
    return f"{user[:1]}***@{domain}{DOMAIN_MARK}"


mask_email = F.udf(lambda email: None if email is None else mask(email), "string")


@F.pandas_udf("int")
def domain_length(emails):
    return emails.str.split("@").str[1].str.len()


@dp.table
def bronze():
    return dp.read_files("landing", schema="id INT, email STRING")


@dp.table
def silver():
    return spark.readStream.table("bronze").select(
        "id", mask_email("email").alias("email"), domain_length("email").alias("domain_length"))
"""


def test_python_udfs_of_a_definition_file_run_in_sparks_python_workers(spark, make_project) -> None:
    """Spark runs UDFs in Python worker processes of their own, which cannot import a definition file
    (it runs as a script): its functions, and what they call, travel pickled by value, as they do to a
    cluster's executors."""
    project = make_project(UDFS)
    project.drop("1.json", [{"id": 1, "email": "ada@example.org"}, {"id": 2, "email": "bo@x.io"}])
    run(spark, project)
    silver = sorted((r["id"], r["email"], r["domain_length"])
                    for r in DeltaTable(project.table("silver")).to_pyarrow_table().to_pylist())
    assert silver == [(1, "a***@example.org#masked", 11), (2, "b***@x.io#masked", 4)]



def test_a_run_slower_to_resolve_than_its_lease_lasts_keeps_its_tables(
        spark, make_project, monkeypatch) -> None:
    from deltaflow.resolve.resolver import Resolver

    real = Resolver.resolve

    def slow(self: Resolver, existing: Collection[str] = ()) -> Resolver:  # creating the tables on a busy
        time.sleep(2.5)  # machine, a cold JVM: seconds
        return real(self, existing)

    monkeypatch.setattr(Resolver, "resolve", slow)
    project = make_project(APPEND_FLOWS, spec_extra="lease:\n  ttl: 3 seconds\n")
    project.drop("0.json", [{"id": "a"}], folder="web")
    (project.root / "shop").mkdir()
    outcomes = project.run(spark)  # the holds are renewed while the run resolves, not only after
    assert {o.state for o in outcomes} == {"completed"}, outcomes
    assert [r["id"] for r in project.rows("all_orders")] == ["a"]
