"""Start-up cost: a restart and a no-op run of the orders pipeline, against a bare SparkSession start.

Every contestant is a new Python process with a new JVM, as a scheduler or a restart after a crash starts
it. In each round, in rotating order:

* ``bare session``: start a SparkSession with Delta and the same jars, run nothing, stop;
* ``bare session, class archive``: the same with the class archive ``deltaflow setup`` builds;
* ``hand-written no-op`` / ``deltaflow no-op``: the orders pipeline (files -> bronze -> silver -> gold)
  with ``availableNow`` and nothing new to read: the whole process. deltaflow finds that out without a JVM
  (:mod:`deltaflow.runtime.nothing_new`) and does not start Spark; the hand-written job starts its queries
  to find nothing;
* ``hand-written restart`` / ``deltaflow restart``: one new order file was dropped; the continuous
  pipeline is started and timed until bronze commits it (then stopped with SIGTERM);
* ``floor``: the least any job can do to commit that file: start a SparkSession (with the class archive,
  as deltaflow's), read the one new file and append it to a Delta table in one batch write, timed the
  same way;
* ``streaming floor``: the least any streaming job can do: one query, files -> Delta sink, nothing else,
  restarted from its checkpoint. What it takes over the floor is Structured Streaming's restart (its
  checkpoint and source logs read back, the query planned and started), which any job that knows what
  it already committed across a crash pays.

The hand-written job is seed 000's three streaming queries (bronze append, silver append with
deduplication, gold in ``complete`` mode), written as a user would. Each contestant keeps its own folders
across rounds, so every round after the first is a restart over existing tables and checkpoints. The
first round is a warm-up (OS caches) and is not counted; medians and spread of the rest.

    .venv/bin/python benchmarks/restart.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from results import Figure, save

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "orders"
ORDER_SCHEMA = ("order_id STRING, customer_id STRING, product_category STRING, amount DOUBLE, "
                "order_timestamp TIMESTAMP")


# -- the hand-written job (run in its own process: `restart.py --hand ROOT --mode noop|continuous`) --------

def hand_session(archive: bool = False) -> Any:
    """A SparkSession as a user's job starts it: Delta's extension and the cached jars, nothing else."""
    from pyspark.sql import SparkSession

    from deltaflow.runtime.class_archive import java_options
    from deltaflow.runtime.jars import jars

    cores = os.cpu_count() or 2
    builder = (SparkSession.builder.master(f"local[{cores}]")
               .config("spark.jars", ",".join(str(j) for j in jars("spark")))
               .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
               .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
               .config("spark.sql.shuffle.partitions", str(cores))  # deltaflow's tuning, for fairness
               .config("spark.databricks.delta.snapshotPartitions", str(cores))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    if archive:
        builder = builder.config("spark.driver.extraJavaOptions", java_options())
    return builder.getOrCreate()


def hand_job(root: Path, continuous: bool) -> None:
    from pyspark.sql import functions as F

    spark = hand_session()
    spark.sparkContext.setLogLevel("ERROR")

    def write(df: Any, name: str, mode: str = "append") -> Any:
        writer = (df.writeStream.format("delta").outputMode(mode)
                  .option("checkpointLocation", str(root / "checkpoints" / name)))
        if continuous:
            return writer.trigger(processingTime="0 seconds").start(str(root / "tables" / name))
        return writer.trigger(availableNow=True).start(str(root / "tables" / name))

    def bronze() -> Any:
        return (spark.readStream.format("json").schema(ORDER_SCHEMA).load(str(root / "landing"))
                .withColumn("source_file", F.input_file_name()))

    def silver() -> Any:
        return (spark.readStream.format("delta").load(str(root / "tables" / "bronze"))
                .where(F.col("order_id").isNotNull() & (F.col("amount") > 0)
                       & F.col("order_timestamp").isNotNull())
                .withWatermark("order_timestamp", "1 day").dropDuplicatesWithinWatermark(["order_id"])
                .withColumn("order_date", F.to_date("order_timestamp")))

    def gold() -> Any:
        return (spark.readStream.format("delta").load(str(root / "tables" / "silver"))
                .groupBy(F.window("order_timestamp", "1 day"), "product_category")
                .agg(F.count("order_id").alias("order_count"), F.sum("amount").alias("total_revenue"),
                     F.avg("amount").alias("avg_order_value")))

    stages = ((bronze, "bronze", "append"), (silver, "silver", "append"), (gold, "gold", "complete"))
    if continuous:  # all three at once, until SIGTERM
        for query, name, mode in stages:
            write(query(), name, mode)
        signal.sigwait({signal.SIGTERM})
        for running in spark.streams.active:
            running.stop()
    else:  # one after the other, each over what the one before wrote
        for query, name, mode in stages:
            write(query(), name, mode).awaitTermination()
    spark.stop()


def bare(archive: bool) -> None:
    hand_session(archive).stop()


def floor_job(root: Path, streaming: bool, wait: bool) -> None:
    """A floor: a session, then the new file of ``root/landing`` appended to a Delta table."""
    spark = hand_session(archive=True)
    table = str(root / "tables" / "floor")
    if streaming:
        query = (spark.readStream.schema(ORDER_SCHEMA).json(str(root / "landing")).writeStream.format("delta")
                 .option("checkpointLocation", str(root / "checkpoint")).start(table))
        if not wait:
            query.processAllAvailable()
            query.stop()
    else:
        newest = max((root / "landing").glob("*.json"), key=lambda p: p.stat().st_mtime)
        spark.read.schema(ORDER_SCHEMA).json(str(newest)).write.format("delta").mode("append").save(table)
    if wait:  # as the restarts: until the measurement has seen the commit
        signal.sigwait({signal.SIGTERM})
    spark.stop()


# -- the measurement -------------------------------------------------------------------------------------

def drop_orders(landing: Path, rng: random.Random, name: str, count: int = 200) -> None:
    from deltaflow.dev.sample_data import order_events, write_json_lines

    landing.mkdir(parents=True, exist_ok=True)
    write_json_lines(landing, name, order_events(rng, datetime.now(UTC), count))


def versions(log: Path) -> int:
    return len(list(log.glob("*.json"))) if log.is_dir() else 0


class Contestant:
    """One way of starting: a command, its folders, and how its time is measured."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], landing: Path | None = None,
                 bronze_log: Path | None = None) -> None:
        self.name, self.command, self.env = name, command, env
        self.landing, self.bronze_log = landing, bronze_log

    def time(self, rng: random.Random, round_no: int) -> float:
        """Seconds: to the process's end, or (restarts) to bronze's next commit."""
        if self.bronze_log is None:
            started = time.perf_counter()
            subprocess.run(self.command, env=self.env, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            return time.perf_counter() - started
        assert self.landing is not None
        before = versions(self.bronze_log)
        drop_orders(self.landing, rng, f"orders-{round_no}.json")
        started = time.perf_counter()
        proc = subprocess.Popen(self.command, env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            while versions(self.bronze_log) <= before:
                if proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited ({proc.returncode}) before committing a batch")
                time.sleep(0.02)
            return time.perf_counter() - started
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=300)


def contestants(tmp: Path) -> list[Contestant]:
    """The eight contestants, each pipeline in folders of its own, run once (untimed) to set them up.

    The no-op runs have folders that never get new files, so every one of their runs is a true no-op; the
    restarts get one new file per round.
    """
    from deltaflow.pipeline import Pipeline

    me = [sys.executable, str(Path(__file__).resolve())]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    rng = random.Random(7)
    print("preparing: each pipeline's first run (untimed)...", flush=True)

    def hand(name: str, continuous: bool) -> Contestant:
        root = tmp / name
        drop_orders(root / "landing", rng, "orders-first.json", 2_000)
        subprocess.run([*me, "--hand", str(root)], env=env, check=True, stderr=subprocess.DEVNULL)
        if not continuous:
            return Contestant(name, [*me, "--hand", str(root)], env)
        return Contestant(name, [*me, "--hand", str(root), "--continuous"], env, root / "landing",
                          root / "tables" / "bronze" / "_delta_log")

    def ours(name: str, continuous: bool) -> Contestant:
        root = tmp / name
        shutil.copytree(EXAMPLE, root / "project")
        ours_env = {**env, "DELTAFLOW_STORAGE": str(root / "data"),
                    "DELTAFLOW_LANDING": str(root / "landing")}
        drop_orders(root / "landing" / "orders", rng, "orders-first.json", 2_000)
        command = [sys.executable, "-m", "deltaflow", "run", "--quiet", "--spec", str(root / "project")]
        subprocess.run([*command, "--available-now"], env=ours_env, check=True, stderr=subprocess.DEVNULL)
        if not continuous:
            return Contestant(name, [*command, "--available-now"], ours_env)
        bronze = Pipeline.load(root / "project", env=ours_env).layout.table("bronze_orders")
        return Contestant(name, [*command, "--continuous"], ours_env, root / "landing" / "orders",
                          Path(bronze) / "_delta_log")

    def floor(name: str, *streaming: str) -> Contestant:
        root = tmp / name.replace(" ", "-")
        drop_orders(root / "landing", rng, "orders-first.json", 2_000)
        command = [*me, "--floor", str(root), *streaming]
        subprocess.run(command, env=env, check=True, stderr=subprocess.DEVNULL)
        return Contestant(name, [*command, "--continuous"], env, root / "landing",
                          root / "tables" / "floor" / "_delta_log")

    return [
        Contestant("bare session", [*me, "--bare"], env),
        Contestant("bare session, class archive", [*me, "--bare", "--archive"], env),
        hand("hand-written no-op", continuous=False),
        ours("deltaflow no-op", continuous=False),
        hand("hand-written restart", continuous=True),
        ours("deltaflow restart", continuous=True),
        floor("floor"),
        floor("streaming floor", "--streaming"),
    ]


def report(times: dict[str, list[float]], rounds: int) -> None:
    def cell(name: str) -> str:
        values = times[name]
        return f"{statistics.median(values):5.1f} s ({min(values):.1f}-{max(values):.1f})"

    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"medians of {rounds} rounds (spread), first round discarded")
    for name in times:
        print(f"  {name:30s} {cell(name)}")
    bare_s = statistics.median(times["bare session"])
    archived = statistics.median(times["bare session, class archive"])
    print("\nratios to a bare SparkSession start (without / with the class archive):")
    for name in ("hand-written no-op", "deltaflow no-op", "hand-written restart", "deltaflow restart",
                 "floor", "streaming floor"):
        value = statistics.median(times[name])
        print(f"  {name:30s} {value / bare_s:.2f}x / {value / archived:.2f}x")
    for what in ("no-op", "restart"):
        hand, ours = (statistics.median(times[f"{who} {what}"]) for who in ("hand-written", "deltaflow"))
        print(f"deltaflow / hand-written, {what}: {ours / hand:.2f}x the time")
    bare, hand = "a bare SparkSession start", "the hand-written job"
    floor = "the floor: a bare start (class archive) + one Delta append of the new file"
    streaming = "the streaming floor: one hand-written files -> Delta query, restarted"
    floor_s, streaming_s = statistics.median(times["floor"]), statistics.median(times["streaming floor"])
    label = {"restart": "restart -> first committed batch", "no-op": "no-op available-now run"}
    save("restart", "Start-up: a restart and a no-op run of the orders pipeline, each a new process", [
        *(Figure(label[kind], "s", times[f"deltaflow {kind}"], times["bare session"], bare,
                 higher_is_better=False, target=1 / 1.5, target_text="≤ 1.5× a bare SparkSession start")
          for kind in ("restart", "no-op")),
        *(Figure(label[kind], "s", times[f"deltaflow {kind}"], times[f"hand-written {kind}"], hand,
                 higher_is_better=False) for kind in ("restart", "no-op")),
        Figure(label["restart"], "s", times["deltaflow restart"], times["floor"], floor,
               higher_is_better=False),
        Figure(label["restart"], "s", times["deltaflow restart"], times["streaming floor"], streaming,
               higher_is_better=False)],
        notes=[f"medians of {rounds} rounds after a warm-up round, the order rotating. The bare start is a "
               "SparkSession with Delta and the same jars, without the class archive; with it: "
               f"{statistics.median(times['bare session, class archive']):.1f} s.",
               "deltaflow's no-op run checks its sources without a JVM and ends without starting Spark; "
               "the hand-written job starts its three queries to find nothing.",
               f"the floors, the least a job can do to commit the new file (each a session with the class "
               f"archive): one batch append, {floor_s:.1f} s ({floor_s / bare_s:.2f}× a bare start); one "
               f"streaming query files -> Delta restarted from its checkpoint, {streaming_s:.1f} s "
               f"({streaming_s / bare_s:.2f}×). Above 1.5×, no job of that kind meets the restart target on "
               "this machine."])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--hand", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--continuous", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--archive", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--floor", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--streaming", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.floor:
        return floor_job(args.floor, args.streaming, args.continuous)
    if args.hand:
        return hand_job(args.hand, args.continuous)
    if args.bare:
        return bare(args.archive)

    rng = random.Random(11)
    with tempfile.TemporaryDirectory(prefix="deltaflow-restart-") as tmp:
        players = contestants(Path(tmp).resolve())
        times: dict[str, list[float]] = {p.name: [] for p in players}
        for r in range(args.warmup + args.rounds):
            label = "warm-up" if r < args.warmup else f"round {r - args.warmup + 1}"
            shift = r % len(players)
            for player in players[shift:] + players[:shift]:
                seconds = player.time(rng, r)
                print(f"{label}: {player.name:30s} {seconds:5.1f} s", flush=True)
                if r >= args.warmup:
                    times[player.name].append(seconds)
        report(times, args.rounds)


if __name__ == "__main__":
    main()
