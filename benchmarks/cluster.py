"""On a Spark standalone cluster vs ``local[*]``: bronze ingest and the clickstream medallion, deltaflow vs
hand-written, in one run.

The project starts a Kafka broker and a standalone cluster on loopback (a master and two workers of one
core each, every one its own process, executors included). Each round runs on both masters (the order
alternates), one SparkSession per master, and on each the four contestants in a rotating order:

* bronze ingest, Kafka -> Delta availableNow: the hand-written seed-004 landing job and a one-table
  deltaflow pipeline (``bronze_ingest.py``'s jobs); events/s of the batches' own time;
* the clickstream medallion working through a backlog (``freshness.py``'s measurement): the seed's three
  hand-written jobs and ``examples/clickstream``; events/s from gold's first commit with data to the commit
  holding them all.

Each new session first runs a small job on every executor, untimed; the first round is a warm-up.
Storage is local disk, which the workers share with the driver on this
machine. With two cores in all, the cluster adds work (a driver and two executor JVMs, tasks and results
over the network) and gains no cores: the figures show what the cluster costs, not what it scales to.

    .venv/bin/python benchmarks/cluster.py [--rounds 3] [--events 200000] [--backlog 60000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bronze_ingest import TOPIC, deltaflow_job, event_payloads, free_port, hand_written, write_project
from deltaflow.dev.broker import EmbeddedKafka
from deltaflow.dev.generator import clickstream_event, produce, user_key
from deltaflow.dev.spark_cluster import LocalSparkCluster
from deltaflow.dev.topics import create_topic
from deltaflow.runtime.session import build_session
from freshness import backlog_rate
from freshness_contestants import Deltaflow, HandWritten
from results import machine_line, versions_line

BACKLOG_TOPIC = "backlog"
CONTESTANTS = ("hand-written bronze", "deltaflow bronze", "hand-written medallion", "deltaflow medallion")


def warm_up(spark: Any, folder: Path) -> None:
    """Work for every executor before anything is timed: on a new session the first job would pay for the
    executors' start and their cold JIT."""
    (spark.range(0, 400_000, numPartitions=8).selectExpr("id", "id % 97 AS k").write.format("delta")
     .save(str(folder)))
    spark.read.format("delta").load(str(folder)).groupBy("k").count().collect()


def contestants(spark: Any, bootstrap: str, args: argparse.Namespace) -> dict[str, Callable[[Path], float]]:
    """Each contestant as a function of a fresh folder, returning its events/s."""
    def bronze_hand(root: Path) -> float:  # bronze_ingest.py's two jobs, measured as it measures them
        return hand_written(spark, bootstrap, root, args.max_offsets)[1]

    def bronze_ours(root: Path) -> float:
        return deltaflow_job(spark, write_project(root, bootstrap, args.max_offsets))[1]

    def medallion(make: Any) -> Callable[[Path], float]:
        return lambda root: backlog_rate(spark, make, root, bootstrap, BACKLOG_TOPIC, args.backlog,
                                         args.backlog // 4)[0]

    return dict(zip(CONTESTANTS, (bronze_hand, bronze_ours, medallion(HandWritten), medallion(Deltaflow)),
                    strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the first a warm-up (at least 2)")
    parser.add_argument("--events", type=int, default=200_000, help="events for bronze ingest")
    parser.add_argument("--max-offsets", type=int, default=50_000, help="maxOffsetsPerTrigger, bronze ingest")
    parser.add_argument("--backlog", type=int, default=60_000,
                        help="clickstream events for the medallion (maxOffsetsPerTrigger a quarter of it)")
    args = parser.parse_args()
    began = time.monotonic()
    print(f"machine: {machine_line()}")
    with tempfile.TemporaryDirectory(prefix="deltaflow-cluster-bench-") as tmp_name:
        tmp = Path(tmp_name)
        cluster = LocalSparkCluster(port=free_port(), ui_port=free_port(), workers=2, cores=1, memory="2g",
                                    state_dir=tmp / "cluster")
        masters = {"local[2]": "local[2]", "cluster (2 workers x 1 core)": cluster.start()}
        try:
            with EmbeddedKafka(state_dir=tmp / "kafka", port=free_port()) as broker:
                bootstrap = broker.status().bootstrap or ""
                create_topic(bootstrap, TOPIC, partitions=3)
                produce(bootstrap, TOPIC, event_payloads(args.events, 200))
                create_topic(bootstrap, BACKLOG_TOPIC, partitions=3)
                rng = random.Random(11)
                produce(bootstrap, BACKLOG_TOPIC,
                        (clickstream_event(rng, datetime.now(UTC)) for _ in range(args.backlog)), user_key)
                print(f"{args.events:,} events for bronze (maxOffsetsPerTrigger {args.max_offsets:,}), "
                      f"{args.backlog:,} clickstream events for the medallion "
                      f"(maxOffsetsPerTrigger {args.backlog // 4:,})\n")
                rates = run_rounds(tmp, masters, bootstrap, args)
        finally:
            cluster.stop()
    report(rates, args.rounds - 1)
    print(f"\nTotal {time.monotonic() - began:.0f} s")


Rates = dict[str, dict[str, list[float]]]


def run_rounds(tmp: Path, masters: dict[str, str], bootstrap: str, args: argparse.Namespace) -> Rates:
    rates: Rates = {m: {c: [] for c in CONTESTANTS} for m in masters}
    folder = 0
    for round_ in range(args.rounds):
        for master in list(masters)[round_ % 2:] + list(masters)[:round_ % 2]:
            spark = build_session(extra={"spark.master": masters[master],
                                         "spark.sql.warehouse.dir": str(tmp / "wh")})
            spark.sparkContext.setLogLevel("ERROR")
            folder += 1
            warm_up(spark, tmp / f"{folder:02d}-warm-up")
            if not round_ and master == next(iter(masters)):
                print(f"versions: {versions_line(spark)}")
            jobs = contestants(spark, bootstrap, args)
            order = CONTESTANTS[round_ % 4:] + CONTESTANTS[:round_ % 4]
            for name in order:
                folder += 1
                rate = jobs[name](tmp / f"{folder:02d}")
                if round_:
                    rates[master][name].append(rate)
                print(f"round {round_}{' (warm-up)' if not round_ else ''}, {master}: {name} "
                      f"{rate:,.0f} events/s")
            spark.stop()
    return rates


def report(rates: Rates, rounds: int) -> None:
    local, cluster = rates
    median = {(m, c): statistics.median(r) for m, by in rates.items() for c, r in by.items()}
    print(f"\n| work | contestant | {local}, events/s | {cluster}, events/s | cluster / local |\n"
          "|---|---|---|---|---|")
    for name in CONTESTANTS:
        cells = [f"{median[(m, name)]:,.0f} ({min(rates[m][name]):,.0f}-{max(rates[m][name]):,.0f})"
                 for m in rates]
        work, who = name.split(" ")[-1], name.rsplit(" ", 1)[0]
        print(f"| {work} | {who} | {cells[0]} | {cells[1]} | "
              f"{median[(cluster, name)] / median[(local, name)]:.2f}x |")
    print(f"\nmedians of {rounds} rounds (spread: lowest-highest)\n\n| work | deltaflow / hand-written, "
          f"{local} | deltaflow / hand-written, {cluster} |\n|---|---|---|")
    for work in ("bronze", "medallion"):
        ratios = [median[(m, f"deltaflow {work}")] / median[(m, f"hand-written {work}")] for m in rates]
        print(f"| {work} | {ratios[0]:.2f}x | {ratios[1]:.2f}x |")


if __name__ == "__main__":
    main()
