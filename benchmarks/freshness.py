"""End-to-end freshness (Kafka produce -> visible in gold): deltaflow vs the seed's hand-written jobs.

The contestants run the clickstream pipeline of seed 000 ("Real Example #1") on this machine:

* deltaflow: ``examples/clickstream`` as shipped (bronze -> silver with dedup -> gold materialized view
  refreshed by window, exact ``countDistinct``), continuous trigger "0 seconds", only the topic renamed;
* hand-written: the seed's three PySpark jobs (bronze Kafka -> Delta with ``from_json``, silver filter, gold
  streaming aggregation in complete mode). Spark cannot run ``countDistinct`` in a streaming aggregation, so
  its gold uses ``approx_count_distinct``: the hand-written gold is approximate, deltaflow's exact;
* hand-written, exact (``--no-exact`` skips it): the same jobs doing deltaflow's work
  as cheaply as Spark allows, silver dropping duplicate events and gold counting distinct users exactly
  through Spark's own deduplication state: what exactness alone costs here. Its gold keeps what
  deltaflow's keeps (``--gold-state``): as shipped, the example's gold drops an hour's state 10 minutes
  after it ends (its lateness), so the exact gold runs with the same watermark, in update mode, MERGEing
  each batch's changed groups; with ``--gold-state every-hour`` deltaflow's gold runs without its
  lateness and the exact one in complete mode, every hour kept.

Steps: (1) the base rate is the throughput of each whole 3-stage pipeline working through a backlog (events
per second reaching gold between its first and its last commit), once on an idle machine and once while the
load generators produce into a topic nobody reads (in the cells they share the cores with Spark); the lower
figure of the second pass is the base rate for both. Large batches make it a ceiling, not what a pipeline
sustains: the highest sustainable rate is the highest cell rate a pipeline kept up with
(``freshness_report.kept_up``). (2) At 50 % and 80 % of it, each contestant runs alone on a fresh topic and
storage while generator processes produce the load; a probe process produces one event with a unique
``product_id`` every ``--probe-interval`` s.
Freshness of a probe = commit time of the first gold version holding its row (the commit file's mtime,
found by replaying the Delta log) - its produce time. (3) Both run once more with the seed's orders-style
triggers (1 min bronze/silver, 5 min gold), scaled by ``--seed-scale`` so that the run stays short.

    .venv/bin/python benchmarks/freshness.py [--duration 75] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import random
import re
import socket
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from deltaflow.dev.broker import EmbeddedKafka
from deltaflow.dev.generator import clickstream_event, produce, user_key
from deltaflow.dev.topics import admin_client, create_topic
from freshness_contestants import (
    Contestant,
    Deltaflow,
    DeltaflowEveryHour,
    HandWritten,
    HandWrittenExact,
    HandWrittenExactBounded,
    stage_intervals,
    wait_for,
)
from freshness_load import CpuMeter, GoldLog, Load
from freshness_report import Cell, print_report, save_results, seconds
from results import machine_line, versions_line

# -- step 1: backlog throughput --------------------------------------------------------------------------

def started(progress: Any) -> float:
    return datetime.fromisoformat(progress.timestamp.replace("Z", "+00:00")).timestamp()


def first_input(query: Any) -> float:
    """Start time of the first micro-batch of ``query`` that read rows."""
    for progress in query.recentProgress:
        if progress.numInputRows:
            return started(progress)
    raise RuntimeError(f"query {query.name or query.id}: no batch with rows in its recent progress")


def backlog_rate(spark: Any, make: Contestant, root: Path, bootstrap: str, topic: str, events: int,
                 max_offsets: int, storage: str | None = None, s3: Any = None) -> tuple[float, str]:
    """Events/s from Kafka to gold while the pipeline works through ``events`` waiting in ``topic``.

    The backlog flows in bronze batches of ``max_offsets``, so that gold commits several times: the rate is
    the events gold gained from its first commit with data to the commit that holds them all, over the
    time between the two commits (start-up and the pipeline's fixed latency left out).
    """
    job = make(spark, root, bootstrap, topic, max_offsets=max_offsets, storage=storage, s3=s3)
    began = time.time()
    job.start()
    log = GoldLog(job.gold, job.s3)
    try:
        wait_for(log, job, lambda: log.events >= events, 900, f"{events:,} events in gold")
        first_batch = first_input(next(iter(job.stage_queries().values())))  # bronze, or bronze+silver
    finally:
        job.stop()
    done = log.first_with(events)
    assert done is not None
    at, total = next((at, total) for at, total in log.versions if total > 0)
    commits = sum(at <= moment <= done for moment, _ in log.versions)
    how = f"start -> all in gold {done - began:5.1f} s; "
    if total <= 0.75 * events and done > at:
        rate = (events - total) / (done - at)
        return rate, how + f"{events - total:>9,} events in {done - at:5.1f} s over {commits} gold commits"
    rate = events / (done - first_batch)
    return rate, how + (f"{events:>9,} events in {done - first_batch:5.1f} s from the first bronze batch "
                        "(too few gold commits to leave out the fixed latency)")


def batch_seconds(job: Deltaflow | HandWritten, since: float) -> dict[str, float]:
    """Median duration of the batches (with rows) each stage started since ``since``."""
    result = {}
    for stage, query in job.stage_queries().items():
        durations = [p.durationMs.get("triggerExecution", 0) / 1000 for p in query.recentProgress
                     if p.numInputRows and started(p) >= since]
        result[stage] = statistics.median(durations) if durations else math.nan
    return result


# -- step 2: freshness cells -----------------------------------------------------------------------------

def run_cell(spark: Any, make: Contestant, cell: Cell, root: Path, bootstrap: str, topic: str,
             args: argparse.Namespace, intervals: dict[str, str] | None) -> Cell:
    create_topic(bootstrap, topic, partitions=3)
    job = make(spark, root, bootstrap, topic, intervals)
    job.start()
    duration, drain = args.duration, args.drain
    if intervals:
        duration = args.seed_duration or duration
        gold_seconds = float(intervals["gold"].split()[0]) / 1000
        bronze_seconds = float(intervals["bronze"].split()[0]) / 1000
        duration = max(duration, 3 * gold_seconds)
        drain += gold_seconds + 2 * bronze_seconds
    count = max(1, int(duration / args.probe_interval))
    load = Load(bootstrap, topic, cell.rate, probes=(args.probe_interval, count))
    log = GoldLog(job.gold, job.s3)
    cpu = CpuMeter(spark.sparkContext._gateway.proc.pid)  # the JVM all queries of both contestants run in
    sent: list[tuple[str, float]] = []
    try:
        wait_for(log, job, lambda: log.events > 0, 300, "first events in gold")
        time.sleep(args.settle)
        load.go.set()
        probes_from = time.time()
        cpu.start()
        wait_for(log, job, lambda: load.probes() is not None, duration + 60, "end of probes", poll=1.0)
        cpu.stop()
        probes_until = time.time()
        cell.machine_cpu, cell.spark_cpu = cpu.machine, cpu.process
        sent = load.probes() or []
        try:
            wait_for(log, job, lambda: all(n in log.first_seen for n, _ in sent), drain, "all probes in gold",
                     poll=0.5)
        except RuntimeError:
            if job.error() is not None:
                raise
            unseen = sum(n not in log.first_seen for n, _ in sent)
            print(f"[{unseen} probe(s) still unseen {drain:.0f} s after the last one; stopped] ", end="")
        cell.batch_seconds = batch_seconds(job, probes_from)
    except RuntimeError as exc:
        cell.error = str(exc)
    finally:
        stopped_at = time.time()
        load.stop()
        stopped_with = job.stop()
        cell.error = cell.error or stopped_with
    log.advance()
    cell.input_rate, cell.generator_cpu = load.rate, load.cpu
    if load.problems:
        cell.error = "; ".join(filter(None, [cell.error, *load.problems]))
    if cell.error is None:
        cell.sent = len(sent)
        cell.freshness = [log.first_seen[name] - at for name, at in sent if name in log.first_seen]
        cell.unseen = [stopped_at - at for name, at in sent if name not in log.first_seen]
        window = probes_until - probes_from
        cell.gold_rate = (log.events_at(probes_until) - log.events_at(probes_from)) / window
    with contextlib.suppress(Exception):  # only disk space is at stake
        admin_client(bootstrap).delete_topics([topic], operation_timeout=10)
    return cell


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Runs:
    """Fresh folders for the runs of one benchmark."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.count = tmp, 0

    def root(self, label: str) -> Path:
        self.count += 1
        return self.tmp / f"{self.count:02d}-{re.sub('[^A-Za-z0-9]+', '-', label)}"  # also a topic name


def measure_base(spark: Any, bootstrap: str, runs: Runs, backlog: int, top: float,
                 contestants: list[Contestant]) -> tuple[dict[str, float], dict[str, float]]:
    """Backlog throughput of each whole pipeline on an idle machine, then while the cells' load generators
    run (the lower one of the second is the base rate)."""
    rng = random.Random(11)
    warm = max(1000, backlog // 50)
    for topic, events in (("backlog-warm-up", warm), ("backlog", backlog)):
        create_topic(bootstrap, topic, partitions=3)
        t0 = time.perf_counter()
        stream = (clickstream_event(rng, datetime.now(UTC)) for _ in range(events))
        produce(bootstrap, topic, stream, user_key)
        print(f"backlog: {events:,} events in topic '{topic}' "
              f"({events / (time.perf_counter() - t0):,.0f} events/s produced)")
    max_offsets = 50_000  # examples/clickstream's own maxOffsetsPerTrigger
    print("\nbase rate = throughput of the whole pipeline (Kafka -> bronze -> silver -> gold) "
          "working through the backlog,\n"
          f"both with maxOffsetsPerTrigger {max_offsets:,} (deltaflow's example sets it; the hand-written "
          "jobs get it for this measurement only)\n"
          "so that gold commits several times; rate = events gold gained from its first commit with data to "
          "the commit holding them all / time between the two commits.")

    def one_pass(label: str, topic: str, events: int) -> dict[str, float]:
        rates = {}
        for make in contestants:
            rates[make.name], how = backlog_rate(spark, make, runs.root(make.name), bootstrap, topic, events,
                                                 max_offsets)
            if label == "warm-up":
                how = how.split(";")[0] + "; discarded"
            print(f"  {label:7s} {make.name:12s} {rates[make.name]:>7,.0f} events/s ({how})")
        return rates

    one_pass("warm-up", "backlog-warm-up", warm)
    print("pass 1, machine otherwise idle:")
    quiet = one_pass("pass 1", "backlog", backlog)
    # The generators and the broker share the cores with Spark in the cells: measure again with them
    # producing, into a topic nobody reads, what the busiest cell will produce.
    background = top * min(quiet.values())
    create_topic(bootstrap, "background", partitions=3)
    print(f"pass 2, load generators producing {background:,.0f} events/s ({top:.0%} of pass 1) into another "
          "topic meanwhile:")
    load = Load(bootstrap, "background", background)
    try:
        loaded = one_pass("pass 2", "backlog", backlog)
    finally:
        load.stop()
    print(f"  (the generators produced {load.rate:,.0f} events/s, using {load.cpu:.0%} of a core)")
    with contextlib.suppress(Exception):
        admin_client(bootstrap).delete_topics(["background"], operation_timeout=10)
    base = min(loaded.values())
    print(f"base rate = the lower of pass 2, {base:,.0f} events/s, for both contestants ('gold/input' below "
          "shows whether a cell kept up)")
    return quiet, loaded


def run_cells(spark: Any, bootstrap: str, runs: Runs, base: float, args: argparse.Namespace,
              contestants: list[Contestant], exact: list[Contestant]) -> list[Cell]:
    """Every contestant at each rate, in an order rotating per rate."""
    fractions = [float(f) for f in args.fractions.split(",")]
    plan: list[tuple[float, float | None]] = [] if args.seed_only else [(f, None) for f in fractions]
    if args.seed_scale:  # at the rate nearest half the base rate, as the runs before 25 % was added
        plan.append((min(fractions, key=lambda f: abs(f - 0.5)), args.seed_scale))
    cells: list[Cell] = []
    for index, (fraction, scale) in enumerate(plan):
        intervals = stage_intervals(scale)
        triggers = "0 s (seed 000)"
        if intervals:
            stages = ("bronze", "silver", "gold")
            triggers = "/".join(f"{float(intervals[s].split()[0]) / 1000:g}" for s in stages) + " s"
        here = contestants + exact
        for make in here[index % len(here):] + here[:index % len(here)]:
            cell = Cell(make.name, fraction, base * fraction, triggers)
            print(f"cell: {make.name} at {cell.rate:,.0f} events/s ({fraction:.0%}), triggers {triggers} "
                  "... ", end="", flush=True)
            root = runs.root(make.name)
            run_cell(spark, make, cell, root, bootstrap, f"fresh-{root.name}", args, intervals)
            p50 = seconds(cell.quantile(0.5)).strip()
            print(f"p50 {p50} s" if not cell.error else f"FAILED: {cell.error}")
            cells.append(cell)
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=75, help="seconds of probes per cell")
    parser.add_argument("--probe-interval", type=float, default=1.0, help="seconds between probes")
    parser.add_argument("--settle", type=float, default=20,
                        help="seconds of load after gold's first rows, before the first probe")
    parser.add_argument("--drain", type=float, default=30, help="seconds to wait for the last probes")
    parser.add_argument("--fractions", default="0.25,0.5,0.8,1,1.25,1.5",
                        help="input rates, as fractions of the base rate")
    parser.add_argument("--backlog", type=int, default=300_000, help="events for the throughput measurement")
    parser.add_argument("--rate", type=float, help="base rate (events/s) instead of measuring it")
    parser.add_argument("--seed-scale", type=float, default=0.1,
                        help="scale of the seed's 1 min / 5 min triggers for the extra cells (0: skip them)")
    parser.add_argument("--no-exact", action="store_true",
                        help="skip the hand-written jobs made exact (run by default at trigger 0)")
    parser.add_argument("--seed-duration", type=float,
                        help="seconds of probes (and of the cores measured) in the cells at the seed's "
                        "triggers (default: --duration); a state store's cost grows with the state, so "
                        "minutes show the steady state")
    parser.add_argument("--seed-only", action="store_true",
                        help="only the cells at the seed's triggers, for an A/B (not saved; give --rate "
                        "to skip the base rate too)")
    parser.add_argument("--state-store", choices=("deltaflow", "default", "rocksdb"), default="deltaflow",
                        help="the state store of every stateful query, for an A/B (deltaflow: its own "
                        "choice, RocksDB for streaming tables; default: Spark's in-memory one)")
    parser.add_argument("--gold-state", choices=("bounded", "every-hour"), default="bounded",
                        help="what gold's state keeps, the same for deltaflow and the exact jobs: bounded "
                        "(the example as shipped, its lateness; the exact gold watermarked, MERGEd) or "
                        "every hour (deltaflow's lateness removed; the exact gold in complete mode)")
    parser.add_argument("--scheduler", choices=("deltaflow", "fifo"), default="deltaflow",
                        help="Spark's task scheduling, for an A/B (deltaflow: FAIR, each query in the pool "
                        "of its depth, runtime/scheduling.py; fifo: Spark's default)")
    parser.add_argument("--quick", action="store_true", help="smoke run: ~20 s cells, small backlog")
    args = parser.parse_args()
    if args.quick:
        args.duration, args.settle, args.drain, args.backlog = 20, 8, 20, 150_000
        args.seed_scale = min(args.seed_scale, 0.02) if args.seed_scale else 0
    began = time.monotonic()

    from deltaflow.runtime.session import build_session

    print(f"machine: {machine_line()}")
    bounded = args.gold_state == "bounded"
    contestants: list[Contestant] = [Deltaflow if bounded else DeltaflowEveryHour, HandWritten]
    with tempfile.TemporaryDirectory(prefix="deltaflow-fresh-") as tmp_name:
        tmp = Path(tmp_name)
        with EmbeddedKafka(state_dir=tmp / "kafka", port=free_port()) as broker:
            bootstrap = broker.status().bootstrap or ""
            package = "org.apache.spark.sql.execution.streaming.state"
            stores = {"default": f"{package}.HDFSBackedStateStoreProvider",
                      "rocksdb": f"{package}.RocksDBStateStoreProvider"}
            provider = ({"spark.sql.streaming.stateStore.providerClass": stores[args.state_store]}
                        if args.state_store in stores else {})
            scheduler = {"spark.scheduler.mode": "FIFO"} if args.scheduler == "fifo" else {}
            spark = build_session(extra={"spark.sql.warehouse.dir": str(tmp / "wh"), **provider, **scheduler})
            print(f"versions: {versions_line(spark)}")
            print(f"spark: {spark.conf.get('spark.master')}, shuffle partitions "
                  f"{spark.conf.get('spark.sql.shuffle.partitions')}, driver memory "
                  f"{spark.conf.get('spark.driver.memory')}; one session for both contestants, one at a time")
            runs = Runs(tmp)
            rates: dict[str, float] = {}
            idle: dict[str, float] = {}
            if args.rate:
                base = args.rate
                print(f"\nbase rate: {base:,.0f} events/s, given with --rate (not measured)")
            else:
                top = max(float(f) for f in args.fractions.split(","))
                idle, rates = measure_base(spark, bootstrap, runs, args.backlog, top, contestants)
                base = min(rates.values())
            exact: list[Contestant] = [] if args.no_exact else [
                HandWrittenExactBounded if bounded else HandWrittenExact]
            cells = run_cells(spark, bootstrap, runs, base, args, contestants, exact)
            spark.stop()
    print_report(cells, args)
    print(f"\ntotal time {time.monotonic() - began:.0f} s")
    sys.stdout.flush()
    if args.seed_only:
        print("--seed-only: results not saved (the report's figures come from one whole run)")
    else:
        save_results(cells, rates, idle, args)


if __name__ == "__main__":
    main()

