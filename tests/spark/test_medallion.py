"""Silver and gold semantics over real Delta tables: cleaning, dedup across restarts, exact gold with late
data, freshness, replayed batches, flow independence, refresh and full refresh."""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from deltaflow.errors import FlowError
from deltaflow.pipeline import Pipeline as Facade
from deltaflow.runtime.refresh import FullRefresh
from deltaflow.runtime.run_plan import RunPlan
from deltaflow.runtime.runner import PipelineRun
from deltaflow.sinks import incremental, materialize
from helpers import Project

PIPELINE = """
import deltaflow as dp
from pyspark.sql import functions as F

SCHEMA = "id STRING, user STRING, product STRING, ts TIMESTAMP, amount DOUBLE"

@dp.table
def bronze():
    return dp.read_files("landing", schema=SCHEMA)

@dp.table
def silver():
    return (spark.readStream.table("bronze")
            .where(F.col("id").isNotNull() & (F.col("amount") > 0))
            .withWatermark("ts", "3 hours")
            .dropDuplicatesWithinWatermark(["id"])
            .drop("_corrupt_record"))

@dp.materialized_view(refresh=dp.by_window("ts", "1 hour"))
def gold():
    return (spark.read.table("silver")
            .groupBy(F.window("ts", "1 hour"), "product")
            .agg(F.count("*").alias("orders"), F.countDistinct("user").alias("unique_users"),
                 F.sum("amount").alias("revenue")))
"""
# An average is not merged batch by batch: this gold recomputes the windows a batch touches.
RECOMPUTED = PIPELINE.replace('F.sum("amount").alias("revenue")',
                              'F.sum("amount").alias("revenue"), F.avg("amount").alias("mean")')


def event(id: str | None, user: str, product: str, ts: str, amount: float) -> dict[str, object]:
    return {"id": id, "user": user, "product": product, "ts": ts, "amount": amount}


class Pipeline:
    """The medallion project above, with a landing folder and a way to drop files into it."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.landing = project.root / "landing"
        self.landing.mkdir(exist_ok=True)
        self.files = 0

    def drop(self, events: list[dict[str, object]]) -> None:
        self.files += 1
        tmp = self.landing / f".tmp-{self.files}"
        tmp.write_text("".join(json.dumps(e) + "\n" for e in events))
        tmp.rename(self.landing / f"batch-{self.files:03d}.json")

    def rows(self, table: str) -> list[dict[str, object]]:
        return self.project.rows(table)

    def run(self, spark, plan: RunPlan | None = None) -> PipelineRun:  # type: ignore[no-untyped-def]
        run = Facade.load(self.project.spec_path, spark=spark).start("available_now", plan=plan)
        run.finish(threading.Event())
        return run


@pytest.fixture
def pipeline(make_project: Callable[..., Project]) -> Pipeline:
    return Pipeline(make_project(PIPELINE))


def expected_gold(silver: list[dict[str, object]]) -> dict[tuple[datetime, str], tuple[int, int, float]]:
    """A batch recomputation of gold over silver, in plain Python."""
    groups: dict[tuple[datetime, str], list[dict[str, object]]] = defaultdict(list)
    for row in silver:
        ts = row["ts"]
        assert isinstance(ts, datetime)
        groups[(ts.replace(minute=0, second=0, microsecond=0, tzinfo=None), str(row["product"]))].append(row)
    return {key: (len(rows), len({r["user"] for r in rows}), round(sum(float(r["amount"]) for r in rows), 6))  # type: ignore[arg-type]
            for key, rows in groups.items()}


def actual_gold(rows: list[dict[str, object]]) -> dict[tuple[datetime, str], tuple[int, int, float]]:
    result = {}
    for row in rows:
        start = row["window"]["start"].replace(tzinfo=None)  # type: ignore[index]
        result[(start, str(row["product"]))] = (row["orders"], row["unique_users"], round(row["revenue"], 6))  # type: ignore[arg-type]
    assert len(result) == len(rows), "gold has duplicate groups"
    return result  # type: ignore[return-value]


def test_silver_cleans_and_dedups_across_restarts(spark, pipeline: Pipeline) -> None:
    pipeline.drop([event("a", "u1", "p1", "2025-05-01T10:00:00Z", 10.0),
                   event("b", "u2", "p1", "2025-05-01T10:01:00Z", 5.0),
                   event("b", "u2", "p1", "2025-05-01T10:01:00Z", 5.0),     # duplicate in the same batch
                   event(None, "u3", "p2", "2025-05-01T10:02:00Z", 7.0),    # no id: cleaned away
                   event("z", "u3", "p2", "2025-05-01T10:02:00Z", -1.0)])   # refund-like: cleaned away
    pipeline.run(spark)
    pipeline.drop([event("a", "u1", "p1", "2025-05-01T10:00:00Z", 10.0),    # duplicate after a restart
                   event("c", "u4", "p2", "2025-05-01T10:05:00Z", 3.0)])
    pipeline.run(spark)

    silver = pipeline.rows("silver")
    assert sorted(str(r["id"]) for r in silver) == ["a", "b", "c"]
    assert len(pipeline.rows("bronze")) == 7  # bronze keeps everything


@pytest.mark.parametrize("mode", ["incremental", "incremental whole", "recomputed", "recomputed whole"])
def test_gold_is_exact_with_late_events_and_replays_change_nothing(  # type: ignore[no-untyped-def]
        spark, make_project, monkeypatch, mode: str) -> None:
    pipeline = Pipeline(make_project(PIPELINE if mode.startswith("incremental") else RECOMPUTED))
    if not mode.endswith("whole"):  # by window, however small the view and its input (these few rows are)
        monkeypatch.setattr(materialize, "FULL_BELOW_BYTES", 0)
        monkeypatch.setattr(incremental, "REWRITE_BELOW_BYTES", -1)
    pipeline.drop([event(f"e{i}", f"u{i % 3}", f"p{i % 2}", f"2025-05-01T{10 + i % 3}:{i:02d}:00Z", 1.0 + i)
                   for i in range(30)])
    pipeline.run(spark)
    assert actual_gold(pipeline.rows("gold")) == expected_gold(pipeline.rows("silver"))

    # Late events for 10:00 (two hours behind the newest, inside the 3-hour watermark), a new user there,
    # and a new hour.
    pipeline.drop([event("late1", "u99", "p0", "2025-05-01T10:30:00Z", 100.0),
                   event("late2", "u1", "p1", "2025-05-01T10:31:00Z", 50.0),
                   event("new1", "u5", "p0", "2025-05-01T13:05:00Z", 2.0)])
    before = {key: value for key, value in actual_gold(pipeline.rows("gold")).items()}
    run = pipeline.run(spark)
    gold = actual_gold(pipeline.rows("gold"))
    assert gold == expected_gold(pipeline.rows("silver"))
    ten, eleven = datetime(2025, 5, 1, 10), datetime(2025, 5, 1, 11)
    assert gold[(ten, "p0")][1] == before[(ten, "p0")][1] + 1          # u99 is a new distinct user
    assert gold[(eleven, "p0")] == before[(eleven, "p0")]              # untouched hour kept as it was
    last = DeltaTable(pipeline.project.table("gold")).history(1)[0]  # one commit
    if mode == "incremental":  # the 3 changed groups (10:00/p0, 10:00/p1, 13:00/p0) MERGEd, no other
        assert last["operation"] == "MERGE"
        metrics = {k: int(v) for k, v in last["operationMetrics"].items() if k.startswith("numTarget")}
        assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"]) == (2, 1)
    elif mode.endswith("whole"):  # every row replaced
        assert last["operation"] == "WRITE"
        parameters = last["operationParameters"]
        assert parameters["mode"] == "Overwrite" and "predicate" not in parameters
    else:  # only the touched hours were replaced
        assert last["operation"] == "WRITE"
        assert "IN (timestamp_micros" in last["operationParameters"]["predicate"]
    if mode.startswith("incremental"):  # from the batch alone, in Spark's state: 3 (hour, product, user)
        batches = [p for p in run.queries["gold"].recentProgress if p.numInputRows]  # never seen, 3 groups
        updated = {op.operatorName: op.numRowsUpdated for p in batches for op in p.stateOperators}
        assert updated == {"dedupe": 3, "stateStoreSave": 3}, updated

    # Crash between gold's Delta commit and its checkpoint commit: the batch is replayed, and skipped.
    checkpoint = pipeline.project.checkpoint("gold")
    commits = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    version = DeltaTable(pipeline.project.table("gold")).version()
    commits[-1].unlink()
    (checkpoint / "commits" / f".{commits[-1].name}.crc").unlink(missing_ok=True)
    pipeline.run(spark)
    assert DeltaTable(pipeline.project.table("gold")).version() == version
    assert (checkpoint / "commits" / commits[-1].name).exists()  # the replayed batch did commit
    assert actual_gold(pipeline.rows("gold")) == gold


def test_a_recomputed_views_first_batch_starts_at_its_inputs_newest_rows_and_recomputes_everything(  # type: ignore[no-untyped-def]
        spark, make_project, monkeypatch) -> None:
    """Its driver starts at the input's newest version that adds rows, not at its whole snapshot."""
    monkeypatch.setattr(materialize, "FULL_BELOW_BYTES", 0)  # later batches by window
    pipeline = Pipeline(make_project(RECOMPUTED))
    only_silver = RunPlan(refresh=frozenset({"silver"}))
    pipeline.drop([event(f"e{i}", f"u{i % 2}", "p1", f"2025-05-01T10:{i:02d}:00Z", 1.0 + i)
                   for i in range(5)])
    pipeline.run(spark, only_silver)
    pipeline.drop([event(f"f{i}", "u7", "p2", f"2025-05-01T11:{i:02d}:00Z", 2.0) for i in range(2)])
    pipeline.run(spark, only_silver)  # silver: two versions with rows; gold not run yet

    pipeline.run(spark)
    checkpoint = pipeline.project.checkpoint("gold")
    end = json.loads((checkpoint / "offsets" / "0").read_text().splitlines()[-1])
    assert end["isStartingVersion"] is False  # read from a version on, not from a snapshot
    gold = actual_gold(pipeline.rows("gold"))
    assert gold == expected_gold(pipeline.rows("silver")) and len(gold) == 2  # both hours, every row

    # Batch 0 replayed (a crash between gold's Delta commit and its checkpoint's): skipped by Delta.
    version = DeltaTable(pipeline.project.table("gold")).version()
    (checkpoint / "commits" / "0").unlink()
    (checkpoint / "commits" / ".0.crc").unlink(missing_ok=True)
    pipeline.run(spark)
    assert (checkpoint / "commits" / "0").exists()
    assert DeltaTable(pipeline.project.table("gold")).version() == version
    assert actual_gold(pipeline.rows("gold")) == gold

    # The restarted driver goes on from batch 0's end: a late row recomputes its hour only.
    pipeline.drop([event("late", "u9", "p1", "2025-05-01T10:59:00Z", 10.0)])
    pipeline.run(spark)
    assert actual_gold(pipeline.rows("gold")) == expected_gold(pipeline.rows("silver"))
    assert "IN (timestamp_micros" in DeltaTable(pipeline.project.table("gold")).history(1)[0][
        "operationParameters"]["predicate"]


def test_a_view_recording_its_change_feed_replaces_only_the_windows_a_batch_touches(  # type: ignore[no-untyped-def]
        spark, make_project) -> None:
    """However small its input, so that its feed holds the changed windows' rows only."""
    declared = '@dp.materialized_view(refresh=dp.by_window("ts", "1 hour"))'
    assert declared in RECOMPUTED
    pipeline = Pipeline(make_project(RECOMPUTED.replace(declared, declared[:-1] + (
        ', table_properties={"delta.enableChangeDataFeed": "true"})'))))
    pipeline.drop([event(f"e{i}", "u1", f"p{i % 2}", f"2025-05-01T1{i % 2}:00:00Z", 1.0) for i in range(4)])
    pipeline.run(spark)
    pipeline.drop([event("late", "u2", "p0", "2025-05-01T10:30:00Z", 5.0)])
    pipeline.run(spark)
    assert actual_gold(pipeline.rows("gold")) == expected_gold(pipeline.rows("silver"))
    gold = DeltaTable(pipeline.project.table("gold"))
    assert "IN (timestamp_micros" in gold.history(1)[0]["operationParameters"]["predicate"]
    changes = pa.table(gold.load_cdf(starting_version=gold.version())).to_pylist()
    assert {(c["window"]["start"].hour, c["product"]) for c in changes} == {(10, "p0")}


def test_gold_is_fresh_within_a_trigger_of_silver(spark, pipeline: Pipeline) -> None:
    spec = pipeline.project.spec_path
    spec.write_text(spec.read_text() + "trigger:\n  mode: continuous\n  interval: 0 seconds\n"
                    "  flows: {bronze: {mode: available_now}}\n")
    now = datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")
    pipeline.drop([event("f1", "u1", "fresh", now, 4.0)])
    run = Facade.load(spec, spark=spark).start()
    stop = threading.Event()
    waiter = threading.Thread(target=run.wait, args=(stop,))
    waiter.start()
    try:
        def gold_for(product: str) -> list[dict[str, object]]:
            return [r for r in pipeline.rows("gold") if r["product"] == product]

        deadline = time.monotonic() + 120
        while not gold_for("fresh") and time.monotonic() < deadline:
            time.sleep(0.2)
        # The event is in the current hour: a watermark-based aggregation would emit it an hour from now.
        assert [(r["orders"], r["revenue"]) for r in gold_for("fresh")] == [(1, 4.0)]
        # the per-flow override made bronze stop by itself while the others keep running
        assert not run.queries["bronze"].isActive
        assert run.queries["silver"].isActive and run.queries["gold"].isActive
    finally:
        stop.set()
        waiter.join(timeout=180)


FAILING = """
import deltaflow as dp
from pyspark.sql import functions as F

@dp.table
def good():
    return dp.read_files("good", schema="id STRING")

@dp.table{rules}
def bad():
    return (dp.read_files("bad", schema="id STRING")
            .withColumn("check", F.when(F.col("id") == "boom", F.raise_error(F.lit("boom row")))
                                  .otherwise(1)))
"""


@pytest.mark.parametrize("rules", ["", "\n@dp.expect_or_quarantine('has_id', 'id IS NOT NULL')"],
                         ids=["append", "quarantine split"])
def test_a_failing_flow_stops_alone_and_the_run_names_it_with_its_cause(  # type: ignore[no-untyped-def]
        spark, make_project, rules: str) -> None:
    project = make_project(FAILING.format(rules=rules))
    for folder, ids in (("good", ["g1", "g2"]), ("bad", ["ok", "boom"])):
        (project.root / folder).mkdir()
        (project.root / folder / "data.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    with pytest.raises(FlowError) as info:
        project.run(spark)
    message = str(info.value)
    assert "1 flow failed: 'bad' (" in message and "defs.py:9)" in message, message
    assert "boom row" in message and "SQLSTATE" not in message, message  # the task's cause, not the job's
    assert "'good'" not in message
    assert sorted(r["id"] for r in DeltaTable(project.table("good")).to_pyarrow_table().to_pylist()) == [
        "g1", "g2"]
    assert not DeltaTable(project.table("bad")).to_pyarrow_table().num_rows


def versions_row_counts(project: Project, table: str) -> list[int]:
    layout, path = project.layout, project.table(table)
    return [layout.open_table(path, version=v).to_pyarrow_dataset().count_rows()
            for v in range(layout.open_table(path).version() + 1)]


def test_the_flows_a_caller_holds_stay_put_while_the_run_starts_more(spark, pipeline: Pipeline) -> None:
    pipeline.drop([event("a", "u1", "p1", "2025-05-01T10:00:00Z", 1.0)])
    run = Facade.load(pipeline.project.spec_path, spark=spark).start("available_now")
    held = run.queries  # a caller's thread may iterate it while the run's thread starts gold
    at_start = sorted(held)
    run.finish(threading.Event())
    # silver (it keeps state: a query of its own) waits for bronze to finish, gold for silver
    assert at_start == ["bronze"]
    assert sorted(held) == at_start
    assert sorted(run.queries) == ["bronze", "gold", "silver"]


def test_refresh_writes_only_the_datasets_it_names(spark, pipeline: Pipeline) -> None:
    pipeline.drop([event("a", "u1", "p1", "2025-05-01T10:00:00Z", 1.0)])
    run = pipeline.run(spark, RunPlan(refresh=frozenset({"silver"})))
    assert sorted(run.queries) == ["silver"]
    assert pipeline.rows("bronze") == pipeline.rows("silver") == pipeline.rows("gold") == []

    run = pipeline.run(spark, RunPlan(refresh=frozenset({"bronze"})))
    assert sorted(run.queries) == ["bronze"]
    assert len(pipeline.rows("bronze")) == 1 and pipeline.rows("silver") == []

    run = pipeline.run(spark, RunPlan(refresh=frozenset({"silver", "gold"})))
    assert sorted(run.queries) == ["gold", "silver"]
    assert len(pipeline.rows("silver")) == 1
    assert actual_gold(pipeline.rows("gold")) == expected_gold(pipeline.rows("silver"))


def test_full_refresh_rebuilds_downstream_atomically(  # type: ignore[no-untyped-def]
        spark, make_project, storage) -> None:
    pipeline = Pipeline(make_project(PIPELINE, s3=storage))
    pipeline.drop([event(f"e{i}", "u1", "p1", f"2025-05-01T10:{i:02d}:00Z", 1.0) for i in range(20)])
    pipeline.run(spark)
    silver_before = sorted(str(r["id"]) for r in pipeline.rows("silver"))
    gold_before = actual_gold(pipeline.rows("gold"))
    layout = pipeline.project.layout
    bronze_version = layout.open_table(layout.table("bronze")).version()

    pipeline.run(spark, RunPlan(full_refresh=frozenset({"silver"})))

    # silver rebuilt, bronze left as it was
    assert [layout.current_generation(d, d) for d in ("bronze", "silver", "gold")] == [0, 1, 1]
    assert sorted(str(r["id"]) for r in pipeline.rows("silver")) == silver_before
    assert actual_gold(pipeline.rows("gold")) == gold_before
    assert layout.open_table(layout.table("bronze")).version() == bronze_version
    # readers never saw silver empty: every version after the first data holds all rows
    counts = versions_row_counts(pipeline.project, "silver")
    first_data = next(i for i, n in enumerate(counts) if n)
    assert set(counts[first_data:]) == {20}
    assert FullRefresh(layout, "silver").pending() is None

    # the rebuilt flows go on from where the rebuild stopped: new rows once, nothing twice
    pipeline.drop([event("new", "u2", "p1", "2025-05-01T10:30:00Z", 5.0)])
    pipeline.run(spark)
    assert sorted(str(r["id"]) for r in pipeline.rows("silver")) == sorted([*silver_before, "new"])
    assert actual_gold(pipeline.rows("gold")) == expected_gold(pipeline.rows("silver"))


def test_an_interrupted_full_refresh_is_finished_by_the_next_run(  # type: ignore[no-untyped-def]
        spark, make_project, storage) -> None:
    pipeline = Pipeline(make_project(PIPELINE, s3=storage))
    pipeline.drop([event(f"e{i}", "u1", "p1", f"2025-05-01T10:{i:02d}:00Z", 1.0) for i in range(5)])
    pipeline.run(spark)
    layout = pipeline.project.layout
    # a run that crashed right after recording the refresh (the new generation is empty)
    FullRefresh(layout, "silver").request({"silver": 1})
    pipeline.run(spark)
    assert FullRefresh(layout, "silver").pending() is None
    assert layout.current_generation("silver", "silver") == 1
    assert sorted(str(r["id"]) for r in pipeline.rows("silver")) == [f"e{i}" for i in range(5)]
    assert not layout.fs.exists(layout.staging("silver"))


def test_each_view_refresh_is_reported_by_the_run_status_and_metrics(  # type: ignore[no-untyped-def]
        spark, make_project, capsys, monkeypatch) -> None:
    """Issue 40, problem 3: a view's batch reads few rows or none, and writes what it recomputed."""
    from prometheus_client.parser import text_string_to_metric_families

    from deltaflow.observe.dashboard import Dashboard
    from deltaflow.ui.metrics import render
    from helpers import cli

    monkeypatch.setattr(materialize, "FULL_BELOW_BYTES", 0)  # later batches by window
    pipeline = Pipeline(make_project(RECOMPUTED))
    spec = str(pipeline.project.spec_path)
    pipeline.drop([event(f"e{i}", f"u{i}", f"p{i % 3}", f"2025-05-01T10:{i:02d}:00Z", 1.0) for i in range(6)])
    first = cli(capsys, "run", "--spec", spec)
    assert first.returncode == 0, first.stderr
    assert "gold: completed, refreshed once this run, 3 rows written" in first.stderr, first.stderr
    pipeline.drop([event("late", "u9", "p7", "2025-05-01T11:30:00Z", 2.0)])
    second = cli(capsys, "run", "--spec", spec)
    assert "gold: completed, refreshed once this run, 1 row written" in second.stderr, second.stderr
    assert len(pipeline.rows("gold")) == 4

    shown = cli(capsys, "status", "--json", "--spec", spec)
    gold = next(f for f in map(json.loads, shown.stdout.splitlines()) if f["flow"] == "gold")
    assert (gold["refreshes"], gold["rows_written"], gold["last_refresh_mode"]) == (2, 4, "windows")
    assert gold["last_batch"] == 1 and gold["last_batch_at"] is not None
    project = pipeline.project
    state, events = Dashboard(project.pipeline().spec, project.layout).snapshot()
    samples = {(s.name, s.labels.get("flow")): s.value
               for family in text_string_to_metric_families(render(state, events).decode())
               for s in family.samples}
    assert samples[("deltaflow_view_refreshes_total", "gold")] == 2
    assert samples[("deltaflow_view_rows_written_total", "gold")] == 4


def test_a_view_without_pipeline_inputs_reports_its_refresh_at_each_run(  # type: ignore[no-untyped-def]
        spark, make_project, capsys) -> None:
    """Issue 40, problem 3: such a view is recomputed at the start of each run, outside any query."""
    from helpers import cli

    project = make_project('import deltaflow as dp\n\n@dp.materialized_view\ndef sizes():\n'
                           '    return spark.range(3).withColumnRenamed("id", "size")\n')
    spec = str(project.spec_path)
    for _ in range(2):
        ran = cli(capsys, "run", "--spec", spec)
        assert ran.returncode == 0, ran.stderr
        assert "sizes: completed, refreshed once this run, 3 rows written" in ran.stderr, ran.stderr
    shown = cli(capsys, "status", "--json", "--spec", spec)
    sizes = next(f for f in map(json.loads, shown.stdout.splitlines()) if f["flow"] == "sizes")
    assert (sizes["refreshes"], sizes["rows_written"], sizes["last_refresh_mode"]) == (2, 6, "full")
    assert sizes["last_batch_at"] is not None
    assert sorted(r["size"] for r in project.rows("sizes")) == [0, 1, 2]
