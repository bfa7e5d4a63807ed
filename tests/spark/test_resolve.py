"""Resolving and analysing a pipeline (``deltaflow dry-run``): one clear error per mistake, with file:line."""

from __future__ import annotations

import gc
import json
import tempfile
from collections.abc import Callable

import pytest

from deltaflow.cli.render import dot, mermaid, text
from deltaflow.errors import GraphError
from deltaflow.pipeline import Pipeline
from deltaflow.resolve.resolver import Resolver
from deltaflow.spec import load_spec
from helpers import Project, cli, free_port

MEDALLION = """
import deltaflow as dp
from pyspark.sql import functions as F

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING, ts TIMESTAMP, amount DOUBLE")

@dp.temporary_view
def valid():
    return spark.readStream.table("bronze").where("id IS NOT NULL")

@dp.table
def silver():
    return dp.read_stream("valid")

@dp.materialized_view(refresh=dp.by_window("ts", "1 day"))
def gold():
    return spark.read.table("silver").groupBy(F.window("ts", "1 day")).agg(F.sum("amount").alias("total"))
"""


def analyse(spark, project: Project) -> Resolver:  # type: ignore[no-untyped-def]
    spec = load_spec(project.spec_path)
    return Pipeline(spec, spark=spark).dry_run()


def error_of(spark, project: Project) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(GraphError) as info:
        analyse(spark, project)
    return str(info.value)


def medallion(make_project: Callable[..., Project], code: str = MEDALLION) -> Project:
    project = make_project(code)
    (project.root / "landing").mkdir()
    return project


def test_the_graph_is_resolved_without_writing_anything(spark, make_project) -> None:
    project = medallion(make_project)
    resolver = analyse(spark, project)

    assert resolver.order() == ["bronze", "valid", "silver", "gold"]
    assert resolver.kinds == {"bronze": "table", "valid": "temporary_view", "silver": "table",
                              "gold": "materialized_view"}
    assert resolver.flows["silver"].inputs == {"valid": "stream"}
    assert resolver.stored_inputs("silver") == {"bronze": "stream"}
    assert resolver.flows["gold"].inputs == {"silver": "batch"}
    assert resolver.downstream({"bronze"}) == {"bronze", "valid", "silver", "gold"}
    assert resolver.upstream({"silver"}) == {"bronze", "valid", "silver"}
    assert resolver.schemas["gold"].names == ["window", "total"]
    assert not project.storage.exists()

    assert "<- files:landing" in text(resolver)
    assert "silver -.->|batch| gold" in mermaid(resolver)
    assert '"valid" -> "silver" [label="stream"];' in dot(resolver)


def test_unknown_input_names_the_line_of_the_read_and_suggests(spark, make_project) -> None:
    code = MEDALLION.replace('spark.read.table("silver")', 'spark.read.table("silvr")')
    project = medallion(make_project, code)
    message = error_of(spark, project)
    assert "flow 'gold' reads unknown dataset 'silvr' (did you mean 'silver'?)" in message
    assert "defs.py:19:" in message


def test_a_cycle_is_named_where_it_closes(spark, make_project) -> None:
    code = MEDALLION.replace('dp.read_files("landing", schema="id STRING, ts TIMESTAMP, amount DOUBLE")',
                             'spark.readStream.table("silver")')
    message = error_of(spark, make_project(code))
    assert "cycle in the dataset graph (each reads the next): bronze -> silver -> valid -> bronze" in message
    assert "defs.py:11:" in message  # where valid reads bronze, closing the cycle


def test_streaming_read_of_a_materialized_view_is_refused(spark, make_project) -> None:
    code = MEDALLION + '\n@dp.table\ndef downstream():\n    return spark.readStream.table("gold")\n'
    message = error_of(spark, medallion(make_project, code))
    assert "flow 'downstream' reads materialized view 'gold' as a stream" in message
    assert "defs.py:23:" in message


def test_a_batch_read_of_a_streaming_view_is_refused(spark, make_project) -> None:
    code = MEDALLION + ('\n@dp.materialized_view\ndef counts():\n'
                        '    return dp.read("valid").groupBy().count()\n')
    message = error_of(spark, medallion(make_project, code))
    assert "temporary view 'valid' is a streaming query but is read as a batch" in message


def test_a_misspelt_delta_option_is_an_error(spark, make_project) -> None:
    code = MEDALLION.replace('dp.read_stream("valid")', 'dp.read_stream("bronze", maxFilePerTrigger=1)')
    message = error_of(spark, medallion(make_project, code))
    assert "unknown Delta source option 'maxFilePerTrigger' reading 'bronze'" in message
    assert "(did you mean 'maxFilesPerTrigger'?)" in message


def test_a_flow_that_fails_to_build_names_its_line(spark, make_project) -> None:
    code = MEDALLION.replace('.where("id IS NOT NULL")', '.where("id IS NOT NULL").select("no_such_column")')
    message = error_of(spark, medallion(make_project, code))
    assert "flow 'valid' failed to build" in message and "no_such_column" in message
    assert "defs.py:11:" in message


def test_a_materialized_view_returning_a_stream_is_refused(spark, make_project) -> None:
    code = MEDALLION.replace('spark.read.table("silver")', 'spark.readStream.table("silver")')
    message = error_of(spark, medallion(make_project, code))
    assert "materialized view 'gold' returns a streaming DataFrame" in message


def test_dry_run_command_prints_the_graph_and_writes_nothing(  # type: ignore[no-untyped-def]
        spark, make_project, capsys, monkeypatch, tmp_path) -> None:
    project = medallion(make_project)
    before = sorted(p.relative_to(project.root) for p in project.root.rglob("*"))
    monkeypatch.chdir(project.root)  # the spec is found from the current folder
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the analysis's scratch folder goes
    result = cli(capsys, "dry-run")
    assert result.returncode == 0, result.stderr
    gc.collect()
    assert not list(tmp_path.glob("deltaflow-analyse-*"))  # removed with its pipeline
    assert "gold" in result.stdout and "materialized view, by window ts 1 day" in result.stdout
    assert "dry-run: ok, 4 datasets (3 stored), 4 flows analysed; nothing was written" in result.stdout
    assert sorted(p.relative_to(project.root) for p in project.root.rglob("*")) == before

    broken = project.root / "transformations" / "defs.py"
    broken.write_text(MEDALLION.replace('spark.read.table("silver")', 'spark.read.table("silvr")'))
    result = cli(capsys, "dry-run")
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [line for line in result.stderr.splitlines() if "DF-GRAPH" in line]
    assert len(errors) == 1 and "transformations/defs.py:19: flow 'gold' reads unknown dataset" in errors[0]


def test_dry_run_and_graph_need_no_broker_but_warn(spark, make_project, capsys) -> None:  # type: ignore[no-untyped-def]
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    code = "import deltaflow as dp\n\n@dp.table\ndef bronze():\n    return dp.read_kafka('t')\n"
    project = make_project(code, bootstrap=address)
    result = cli(capsys, "dry-run", "--spec", str(project.spec_path))
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("warning:")] == [
        f"warning: {address}: Kafka broker unreachable ('deltaflow run' needs it)"]
    assert "<- kafka:t" in result.stdout
    graph = cli(capsys, "graph", "--format", "json", "--spec", str(project.spec_path))
    assert graph.returncode == 0
    (bronze,) = json.loads(graph.stdout)["datasets"]
    assert bronze["dataset"] == "bronze" and bronze["flows"][0]["sources"] == ["kafka:t"]
    assert not project.storage.exists()  # analysed, nothing written
