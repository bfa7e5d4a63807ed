"""Gold batch time as its window fills: incremental view vs window recompute vs the seed's hand-written gold.

Seed 000's gold (views, unique users and revenue per product and hour) over a silver table that grows by
``--rows`` rows per step, every row in the same hour, so the hour's window holds ``step × rows`` rows.
After each step each contestant processes the new rows once (trigger availableNow) and the time of its
gold micro-batch is recorded (Spark's ``triggerExecution``):

* deltaflow, incremental: ``examples/clickstream``'s gold as shipped (exact ``countDistinct``); its totals
  live in Spark's state store, each batch folded in (``deltaflow graph`` says ``incremental``);
* deltaflow, recomputed: the same view with an ``avg`` added, which cannot be merged, so each batch
  recomputes its hour from every silver row in it (the mode every by-window view had before);
* hand-written: the seed's streaming aggregation, ``approx_count_distinct`` (Spark has no streaming exact
  distinct count), written to Delta in complete mode as the seed does;
* hand-written, exact: the same aggregation with the distinct users counted exactly through Spark's own
  deduplication state (each (hour, product, user) once, counted beside the rows), still in complete mode:
  what the exact count costs when written by hand as cheaply as Spark allows.

The contestants take turns in a rotating order at each step; step 0 (every query's first batch) is a
warm-up and not reported. The figure that matters is how each batch time grows from the first steps to the
last ones: flat means proportional to the batch, not to the window.

    .venv/bin/python benchmarks/gold_batches.py [--rows 40000] [--steps 10]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deltaflow.pipeline import Pipeline
from deltaflow.runtime.session import build_session
from freshness_contestants import HandWritten, HandWrittenExact
from results import Figure, machine_line, save, versions_line

HOUR = "2026-11-24 10:00:00"
GOLD = '''\
import deltaflow as dp
from pyspark.sql import functions as F

@dp.table
def silver_clicks():
    return spark.readStream.format("delta").load({silver!r})

@dp.materialized_view(refresh=dp.by_window("event_timestamp", "1 hour"))
def gold():
    return (spark.read.table("silver_clicks")
            .groupBy(F.window("event_timestamp", "1 hour"), "product_id")
            .agg(F.count("*").alias("view_count"), F.countDistinct("user_id").alias("unique_users"),
                 F.sum("revenue").alias("total_revenue"){extra}))
'''


def spread(prefix: str, salt: str, count: int) -> Any:
    """``prefix`` + one of ``count`` numbers, picked by a hash of the row id."""
    from pyspark.sql import functions as F

    return F.concat(F.lit(prefix), F.pmod(F.xxhash64("id", F.lit(salt)), F.lit(count)).cast("string"))


def append_silver(spark: Any, path: str, step: int, rows: int, users: int, products: int) -> None:
    """``rows`` clicks in the hour starting at ``HOUR``, users and products spread by hash."""
    from pyspark.sql import functions as F

    ids = spark.range(step * rows, (step + 1) * rows)
    (ids.select(
        F.concat(F.lit("e"), F.col("id").cast("string")).alias("event_id"),
        spread("u", "user", users).alias("user_id"),
        spread("p", "product", products).alias("product_id"),
        (F.to_timestamp(F.lit(HOUR)) + F.make_interval(secs=F.pmod(F.col("id"), F.lit(3600)).cast("double")))
        .alias("event_timestamp"),
        (F.pmod(F.col("id"), F.lit(100)) / 10).alias("revenue"))
     .coalesce(1).write.format("delta").mode("append").save(path))


def gold_seconds(progress: list[Any]) -> float:
    """The time of the batches that read rows (one per step)."""
    return sum(p.durationMs.get("triggerExecution", 0) for p in progress if p.numInputRows) / 1000


def deltaflow_contestant(spark: Any, root: Path, silver: str, extra: str) -> Callable[[], float]:
    (root / "transformations").mkdir(parents=True)
    (root / "transformations" / "defs.py").write_text(GOLD.format(silver=silver, extra=extra))
    (root / "deltaflow.yml").write_text(
        "name: gold_bench\nstorage: ./storage\nlibraries: [transformations/*.py]\n")

    def step() -> float:
        run = Pipeline.load(root, spark=spark).start("available_now")
        run.finish(threading.Event())
        return gold_seconds(run.queries["gold"].recentProgress)

    return step


def hand_written(spark: Any, root: Path, silver: str, job: type[HandWritten]) -> Callable[[], float]:
    """``job``'s gold query over ``silver``, in complete mode as the seed writes it."""

    def step() -> float:
        query = (job.hourly_metrics(spark.readStream.format("delta").load(silver))
                 .writeStream.format("delta").outputMode("complete")
                 .option("checkpointLocation", str(root / "checkpoint")).trigger(availableNow=True)
                 .start(str(root / "gold")))
        query.awaitTermination()
        return gold_seconds(query.recentProgress)

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=40_000, help="silver rows per step")
    parser.add_argument("--steps", type=int, default=10, help="steps after the warm-up")
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--products", type=int, default=500)
    args = parser.parse_args()
    began = time.monotonic()
    print(f"machine: {machine_line()}")
    tmp = Path(tempfile.mkdtemp(prefix="deltaflow-gold-"))
    try:
        spark = build_session(extra={"spark.sql.warehouse.dir": str(tmp / "wh")})
        spark.sparkContext.setLogLevel("ERROR")
        print(f"versions: {versions_line(spark)}")
        silver = str(tmp / "silver")
        contestants = {
            "deltaflow, incremental": deltaflow_contestant(spark, tmp / "incremental", silver, ""),
            "deltaflow, recomputed": deltaflow_contestant(spark, tmp / "recomputed", silver,
                                                          ', F.avg("revenue").alias("mean_revenue")'),
            "hand-written": hand_written(spark, tmp / "hand", silver, HandWritten),
            "hand-written, exact": hand_written(spark, tmp / "exact", silver, HandWrittenExact),
        }
        names = list(contestants)
        times: dict[str, list[float]] = {name: [] for name in names}
        print(f"\n| rows in the hour | {' | '.join(names)} |\n|---|{'---|' * len(names)}")
        for step in range(args.steps + 1):
            append_silver(spark, silver, step, args.rows, args.users, args.products)
            order = names[step % len(names):] + names[:step % len(names)]
            measured = {name: contestants[name]() for name in order}
            if step == 0:
                continue  # every query's first batch: the warm-up
            for name in names:
                times[name].append(measured[name])
            cells = " | ".join(f"{measured[n]:.2f} s" for n in names)
            print(f"| {(step + 1) * args.rows:,} | {cells} |", flush=True)
        spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    half = max(1, args.steps // 3)
    print(f"\nGold batch time, first {half} vs last {half} steps (median, spread), and growth:\n")
    print("| contestant | first steps | last steps | growth | last steps vs hand-written |")
    print("|---|---|---|---|---|")
    hand_last = statistics.median(times["hand-written"][-half:])
    for name in names:
        first, last = times[name][:half], times[name][-half:]
        print(f"| {name} | {statistics.median(first):.2f} s ({min(first):.2f}-{max(first):.2f}) | "
              f"{statistics.median(last):.2f} s ({min(last):.2f}-{max(last):.2f}) | "
              f"{statistics.median(last) / statistics.median(first):.2f}x | "
              f"{statistics.median(last) / hand_last:.2f}x |")
    print(f"\n{args.rows:,} rows per step, {args.users:,} users, {args.products} products; "
          f"total {time.monotonic() - began:.0f} s")
    growth = {name: statistics.median(times[name][-half:]) / statistics.median(times[name][:half])
              for name in names}
    save("gold_batches", "Gold batch time as the hour's window fills: incremental view vs window recompute "
         "vs the seed's hand-written gold", [
             Figure(f"gold batch, last {half} steps", "s", times["deltaflow, incremental"][-half:],
                    times["hand-written"][-half:], "hand-written (approx_count_distinct, complete mode)",
                    higher_is_better=False),
             Figure(f"gold batch, last {half} steps", "s", times["deltaflow, incremental"][-half:],
                    times["hand-written, exact"][-half:], "hand-written, exact (its own deduplication state)",
                    higher_is_better=False, target=1 / 1.1, target_text="≤ 1.1× the exact job"),
             Figure(f"gold batch, last {half} steps", "s", times["deltaflow, incremental"][-half:],
                    times["deltaflow, recomputed"][-half:], "deltaflow, window recomputed",
                    higher_is_better=False)],
         notes=["target: gold batch time flat through the hour. Growth from the first to the last "
                f"{half} steps (median): " + ", ".join(f"{n} {g:.2f}×" for n, g in growth.items()) +
                f"; {args.rows:,} rows per step, {args.steps} steps, all in one hour."],
         data={"batch_seconds": times, "rows_per_step": args.rows})


if __name__ == "__main__":
    main()
