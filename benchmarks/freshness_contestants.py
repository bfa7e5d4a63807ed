"""The freshness benchmark's contestants (see ``freshness.py``): deltaflow's clickstream example and the
seed's hand-written jobs, started and stopped the same way, and the trigger model they are judged against.
"""

from __future__ import annotations

import math
import shutil
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deltaflow.sinks.read_rows import ROWS_METRIC
from freshness_load import GoldLog

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "clickstream"
GOLD = "gold_hourly_product_metrics"
# The fields of the generated events (seed 000's event_schema, as in examples/clickstream/silver.py).
EVENT_SCHEMA = (
    "event_id STRING, user_id STRING, product_id STRING, event_type STRING, event_timestamp TIMESTAMP, "
    "revenue DOUBLE, session_id STRING, page STRING, user_agent STRING"
)


# -- the contestants -------------------------------------------------------------------------------------

def grid_model(bronze: float, silver: float, gold: float, steps: int = 200_000) -> tuple[float, float, float]:
    """Freshness (min, mean, max) that processing-time triggers alone impose, with no processing time.

    Spark fires a processing-time trigger at the multiples of its interval (since the epoch). An event
    produced at t is read by the next bronze trigger b > t; silver triggers at the same instant as bronze
    run concurrently and miss that batch, so silver reads it at its next trigger after b, gold at its
    next trigger after that.
    """
    def after(moment: float, interval: float) -> float:
        return (math.floor(moment / interval + 1e-9) + 1) * interval

    period = 10 * max(bronze, silver, gold)
    waits = []
    for i in range(steps):
        t = (i + 0.5) * period / steps
        waits.append(after(after(after(t, bronze), silver), gold) - t)
    return min(waits), statistics.fmean(waits), max(waits)


def stage_intervals(scale: float | None) -> dict[str, str] | None:
    """The seed's orders-style triggers (1 min bronze and silver, 5 min gold) times ``scale``; None: 0."""
    if scale is None:
        return None
    return {stage: f"{round(seconds * scale * 1000)} milliseconds"
            for stage, seconds in (("bronze", 60), ("silver", 60), ("gold", 300))}


#: The lateness of the example's gold (``dp.by_window(..., lateness=...)``): its state keeps recent hours.
LATENESS = "10 minutes"


class Deltaflow:
    """examples/clickstream, in process, continuous (per-flow triggers when ``intervals`` are given)."""

    name = "deltaflow"
    #: Gold as shipped, its state bounded by :data:`LATENESS`; False: every hour kept (the lateness removed).
    bounded = True

    def __init__(self, spark: Any, root: Path, bootstrap: str, topic: str,
                 intervals: dict[str, str] | None = None, max_offsets: int | None = None,
                 storage: str | None = None, s3: Any = None) -> None:
        self.spark, self.root, self.bootstrap, self.topic = spark, root, bootstrap, topic
        self.intervals, self.max_offsets = intervals, max_offsets
        self.storage, self.s3 = storage, s3  # tables and checkpoints elsewhere than under root (S3)
        self.outcomes: list[Any] = []

    def start(self) -> None:
        from deltaflow.pipeline import Pipeline

        project = self.root / "project"
        shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", "data", "storage"))
        bronze = project / "transformations" / "bronze.py"
        text = bronze.read_text()
        patched = text.replace('read_kafka("clicks"', f'read_kafka("{self.topic}"')
        limit = "max_offsets_per_trigger="
        if self.max_offsets:
            patched = patched.replace(f"{limit}50_000", f"{limit}{self.max_offsets}")
        limited = not self.max_offsets or f"{limit}{self.max_offsets}" in patched
        if patched.count(self.topic) != 1 or not limited:
            raise RuntimeError(f"{bronze}: 'read_kafka(\"clicks\", {limit}50_000)' not found")
        bronze.write_text(patched)
        if not self.bounded:
            gold = project / "transformations" / "gold.py"
            shipped = f', lateness="{LATENESS}"'
            if gold.read_text().count(shipped) != 1:
                raise RuntimeError(f"{gold}: '{shipped}' not found")
            gold.write_text(gold.read_text().replace(shipped, ""))
        if self.intervals:  # per-flow trigger intervals, declared in the spec as a user would
            stage = {"bronze_clicks": "bronze", "silver_clicks": "silver", GOLD: "gold"}
            flows = "".join(f"    {name}: {{interval: {self.intervals[part]}}}\n"
                            for name, part in stage.items())
            spec = project / "deltaflow.yml"
            spec.write_text(spec.read_text() + f"  flows:\n{flows}")
        env = {"DELTAFLOW_STORAGE": self.storage or str(self.root / "storage"),
               "DELTAFLOW_KAFKA": self.bootstrap}
        if self.s3 is not None:
            env["DELTAFLOW_S3_ENDPOINT"] = self.s3.endpoint
        pipeline = Pipeline.load(project, spark=self.spark, env=env)
        self.gold = pipeline.layout.table(GOLD)
        self.stopping = threading.Event()
        self.run = pipeline.start("continuous")
        self.thread = threading.Thread(target=self._wait, name="deltaflow-run", daemon=True)
        self.thread.start()

    def _wait(self) -> None:
        self.outcomes = self.run.wait(self.stopping)

    def stage_queries(self) -> dict[str, Any]:
        """Each stage's query; bronze and silver as one, "bronze+silver", when bronze's carries silver."""
        names = {"bronze": "bronze_clicks", "silver": "silver_clicks", "gold": GOLD}
        queries = {stage: self.run.queries[name] for stage, name in names.items() if name in self.run.queries}
        if "silver" in queries and queries["silver"] is queries.get("bronze"):
            carrier = queries.pop("bronze")
            queries = {"bronze+silver": carrier, **{s: q for s, q in queries.items() if s != "silver"}}
        return queries

    def error(self) -> str | None:
        failed = [f"{o.flow}: {o.error}" for o in self.run.finished.values() if o.state == "failed"]
        failed += [f"{n}: {q.exception()}" for n, q in self.run.queries.items() if not q.isActive]
        return "; ".join(failed) or None

    def stop(self) -> str | None:
        self.stopping.set()
        self.thread.join()
        failed = [f"{o.flow}: {o.error}" for o in self.outcomes if o.state == "failed"]
        return "; ".join(failed) or None


class HandWritten:
    """Seed 000's clickstream jobs (bronze from Kafka as in its Example #2), three queries, one session."""

    name = "hand-written"

    def __init__(self, spark: Any, root: Path, bootstrap: str, topic: str,
                 intervals: dict[str, str] | None = None, max_offsets: int | None = None,
                 storage: str | None = None, s3: Any = None) -> None:
        self.spark, self.root, self.bootstrap, self.topic = spark, root, bootstrap, topic
        self.intervals, self.max_offsets = intervals, max_offsets
        self.base, self.s3 = storage or str(root), s3  # tables and checkpoints: under root, or on S3
        self.gold = f"{self.base}/delta/gold/hourly_product_metrics"
        self.queries: list[Any] = []

    def _write(self, df: Any, stage: str, path: str, mode: str = "append",
               each_batch: Callable[[Any, int], None] | None = None) -> None:
        """Start ``stage``'s query writing ``df`` to ``path`` (through ``each_batch`` when given)."""
        checkpoint = f"{self.base}/checkpoints/{stage}"
        writer = df.writeStream.outputMode(mode).option("checkpointLocation", checkpoint)
        if self.intervals:
            writer = writer.trigger(processingTime=self.intervals[stage])
        if each_batch is not None:
            self.queries.append(writer.foreachBatch(each_batch).start())
        else:
            self.queries.append(writer.format("delta").start(str(path)))

    def start(self) -> None:
        from pyspark.sql.functions import col, from_json

        spark = self.spark
        bronze = f"{self.base}/delta/bronze/clickstream"
        silver = f"{self.base}/delta/silver/clickstream"
        reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", self.bootstrap)
                  .option("subscribe", self.topic).option("startingOffsets", "earliest"))
        if self.max_offsets:  # only to measure throughput (the seed sets no limit)
            reader = reader.option("maxOffsetsPerTrigger", str(self.max_offsets))
        raw_events = (reader.load()
                      .select(from_json(col("value").cast("string"), EVENT_SCHEMA).alias("e")).select("e.*"))
        # The seed starts the three jobs against tables that already exist: create them (empty) first.
        spark.createDataFrame([], raw_events.schema).write.format("delta").save(bronze)
        self._write(raw_events, "bronze", bronze)

        silver_stream = self.silver(spark.readStream.format("delta").load(bronze))
        spark.createDataFrame([], silver_stream.schema).write.format("delta").save(silver)
        self._write(silver_stream, "silver", silver)
        self.start_gold(spark.readStream.format("delta").load(silver))

    def start_gold(self, silver: Any) -> None:
        """Gold over the ``silver`` stream: the seed's streaming aggregation, every hour, complete mode."""
        self._write(self.hourly_metrics(silver), "gold", self.gold, mode="complete")

    @staticmethod
    def silver(bronze: Any) -> Any:
        """Seed 000's silver: events with a type and a user."""
        from pyspark.sql.functions import col, current_timestamp, to_date

        return (bronze.filter(col("event_type").isNotNull())
                .filter(col("user_id").isNotNull())
                .withColumn("event_date", to_date("event_timestamp"))
                .withColumn("processed_at", current_timestamp()))

    @staticmethod
    def hourly_metrics(silver: Any) -> Any:
        """Seed 000's gold, with Spark's approximate distinct count (it has no exact one in a stream)."""
        from pyspark.sql.functions import approx_count_distinct, count, window
        from pyspark.sql.functions import sum as sum_

        return (silver.withWatermark("event_timestamp", "1 hour")
                .groupBy(window("event_timestamp", "1 hour"), "product_id")
                .agg(count("*").alias("view_count"),
                     approx_count_distinct("user_id").alias("unique_users"),
                     sum_("revenue").alias("total_revenue")))

    def stage_queries(self) -> dict[str, Any]:
        return dict(zip(("bronze", "silver", "gold"), self.queries, strict=False))

    def error(self) -> str | None:
        return "; ".join(f"{q.name or q.id}: {q.exception()}" for q in self.queries if not q.isActive) or None

    def stop(self) -> str | None:
        for query in self.queries:  # upstream first, each between two batches (as deltaflow stops)
            deadline = time.monotonic() + 60
            while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
                time.sleep(0.02)
            query.stop()
        return "; ".join(str(q.exception()) for q in self.queries if q.exception() is not None) or None


class HandWrittenExact(HandWritten):
    """The seed's jobs doing the work deltaflow's example does, written by hand as cheaply as Spark allows:
    silver drops duplicate events (as ``examples/clickstream`` does), and gold counts distinct users exactly
    through Spark's own deduplication state (each (hour, product, user) once, counted beside the rows),
    still one streaming aggregation in complete mode. It shows what exactness alone costs on this machine.
    """

    name = "hand-written, exact"

    @staticmethod
    def silver(bronze: Any) -> Any:
        return (HandWritten.silver(bronze).withWatermark("event_timestamp", "10 minutes")
                .dropDuplicatesWithinWatermark(["event_id"]))

    @staticmethod
    def hourly_metrics(silver: Any) -> Any:
        from pyspark.sql.functions import col, count, lit, when, window
        from pyspark.sql.functions import sum as sum_

        # the union below scans each batch twice, and Spark's numInputRows counts both: count the rows read
        # once, as deltaflow's incremental view does (sinks/read_rows), for the profile's rows per batch
        silver = silver.observe(ROWS_METRIC, count(lit(1)).alias("rows"))
        rows = silver.select(window("event_timestamp", "1 hour").alias("window"), "product_id", "user_id",
                             "revenue", lit(False).alias("pair"))
        pairs = (rows.dropDuplicates(["window", "product_id", "user_id"])
                 .select("window", "product_id", "user_id", lit(None).cast("double").alias("revenue"),
                         lit(True).alias("pair")))
        return (rows.unionByName(pairs).groupBy("window", "product_id")
                .agg(count(when(~col("pair"), 1)).alias("view_count"),
                     count(when(col("pair"), 1)).alias("unique_users"),
                     sum_("revenue").alias("total_revenue")))


class HandWrittenExactBounded(HandWrittenExact):
    """The exact jobs with gold's state bounded as the example's: the same watermark, :data:`LATENESS`, on
    gold's input, so Spark drops an hour's state once the watermark passes its end; update mode, each
    batch's changed groups MERGEd into gold by (window, product). The same work as deltaflow's gold.
    """

    def start_gold(self, silver: Any) -> None:
        self._write(self.hourly_metrics(silver.withWatermark("event_timestamp", LATENESS)), "gold", self.gold,
                    mode="update", each_batch=merge_into(self.spark, self.gold))


class DeltaflowEveryHour(Deltaflow):
    """examples/clickstream with its gold's lateness removed: every hour kept, as the complete-mode exact
    jobs keep them."""

    bounded = False


def merge_into(spark: Any, gold: str) -> Callable[[Any, int], None]:
    """A foreachBatch function MERGEing an update-mode batch of hourly totals into ``gold`` by group."""
    from delta.tables import DeltaTable

    def merge(batch: Any, batch_id: int) -> None:
        if not DeltaTable.isDeltaTable(spark, gold):
            batch.write.format("delta").save(gold)
            return
        (DeltaTable.forPath(spark, gold).alias("t")
         .merge(batch.alias("s"), "t.window = s.window AND t.product_id = s.product_id")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())

    return merge


Contestant = type[Deltaflow] | type[HandWritten]


def wait_for(log: GoldLog, job: Deltaflow | HandWritten, done: Callable[[], bool], timeout: float,
             what: str, poll: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while True:
        log.advance()
        if done():
            return
        if (error := job.error()) is not None:
            raise RuntimeError(f"{job.name} failed while waiting for {what}: {error}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{job.name}: no {what} within {timeout:.0f} s")
        time.sleep(poll)


