"""End-to-end freshness (Kafka produce -> visible in gold): deltaflow vs the seed's hand-written jobs.

The contestants run the clickstream pipeline of seed 000 ("Real Example #1") on this machine:

* deltaflow: ``examples/clickstream`` as shipped (bronze -> silver with dedup -> gold materialized view
  refreshed by window, exact ``countDistinct``), continuous trigger "0 seconds", only the topic renamed;
* hand-written: the seed's three PySpark jobs (bronze Kafka -> Delta with ``from_json``, silver filter, gold
  streaming aggregation in complete mode). Spark cannot run ``countDistinct`` in a streaming aggregation, so
  its gold uses ``approx_count_distinct``: the hand-written gold is approximate, deltaflow's exact.

Steps: (1) the highest sustainable input rate is measured as the throughput of each whole 3-stage pipeline
working through a backlog (events per second reaching gold between its first and its last commit), once on
an idle machine and once while the load generators produce into a topic nobody reads (in the cells they
share the cores with Spark); the lower figure of the second pass is the base rate for both. (2) At 50 % and
80 % of it, each contestant runs alone on a fresh topic and storage while generator processes produce the
load; a probe process produces one event with a unique ``product_id`` every ``--probe-interval`` s.
Freshness of a probe = commit time of the first gold version holding its row (the commit file's mtime,
found by replaying the Delta log) - its produce time. (3) Both run once more with the seed's orders-style
triggers (1 min bronze/silver, 5 min gold), scaled by ``--seed-scale`` so that the run stays short.

    .venv/bin/python benchmarks/freshness.py [--duration 75] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing as mp
import os
import platform
import random
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from deltaflow.dev.broker import EmbeddedKafka
from deltaflow.dev.generator import EventGenerator, clickstream_event, encode_event, produce, user_key
from deltaflow.dev.topics import QUIET, admin_client, create_topic

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "clickstream"
GOLD = "gold_hourly_product_metrics"
PROBE = "probe-"
# The fields of the generated events (seed 000's event_schema, as in examples/clickstream/silver.py).
EVENT_SCHEMA = (
    "event_id STRING, user_id STRING, product_id STRING, event_type STRING, event_timestamp TIMESTAMP, "
    "revenue DOUBLE, session_id STRING, page STRING, user_agent STRING"
)
EVENTS_PER_GENERATOR = 12_000  # one Python generator process makes ~25k events/s alone; keep a margin


# -- load: generator and probe processes (spawned, so that their Python does not hold this process's GIL) --

def _generate(bootstrap: str, topic: str, rate: float, seed: int, stop: Any, out: Any) -> None:
    gen = EventGenerator(bootstrap, topic, rate=rate, seed=seed)
    t0, cpu0 = time.time(), time.process_time()
    gen.start()
    stop.wait()
    t1 = time.time()
    gen.stop()
    gen.join()
    out.put(("generated", gen.produced, t1 - t0, time.process_time() - cpu0,
             repr(gen.error) if gen.error else None))


def _probe(bootstrap: str, topic: str, interval: float, count: int, go: Any, stop: Any, out: Any) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 0, **QUIET})
    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    rng = random.Random()
    go.wait()
    start = time.monotonic()
    sent = []
    for n in range(count):
        if stop.wait(max(0.0, start + n * interval - time.monotonic())):
            break
        now = datetime.now(UTC)
        event = clickstream_event(rng, now)
        product = f"{PROBE}{n:04d}"
        event.update(product_id=product, event_type="view", revenue=0.0, page=f"/product/{product}",
                     event_timestamp=now.isoformat(timespec="milliseconds").replace("+00:00", "Z"))
        produced_at = time.time()
        producer.produce(topic, value=encode_event(event), key=user_key(event), on_delivery=delivered)
        producer.flush(10)
        sent.append((product, produced_at))
    out.put(("probes", sent, errors))


class Load:
    """Generator processes producing ``rate`` events/s to ``topic`` (and a probe process, if asked)."""

    def __init__(self, bootstrap: str, topic: str, rate: float,
                 probes: tuple[float, int] | None = None) -> None:
        context = mp.get_context("spawn")
        self.stopping, self.go, self.out = context.Event(), context.Event(), context.Queue()
        self.generators = max(1, math.ceil(rate / EVENTS_PER_GENERATOR))
        self.messages: list[tuple[Any, ...]] = []
        self.processes = [context.Process(target=_generate, daemon=True, args=(
            bootstrap, topic, rate / self.generators, 1000 * i + 7, self.stopping, self.out))
            for i in range(self.generators)]
        if probes is not None:
            self.processes.append(context.Process(target=_probe, daemon=True, args=(
                bootstrap, topic, *probes, self.go, self.stopping, self.out)))
        for process in self.processes:
            process.start()

    def probes(self) -> list[tuple[str, float]] | None:
        """(product_id, produce time) of each probe, once the probe process has sent them all."""
        while not self.out.empty():
            self.messages.append(self.out.get())
        return next((m[1] for m in self.messages if m[0] == "probes"), None)

    def stop(self) -> None:
        self.stopping.set()
        self.go.set()
        while sum(m[0] == "generated" for m in self.messages) < self.generators:
            self.messages.append(self.out.get(timeout=120))
        for process in self.processes:
            process.join(timeout=60)

    @property
    def rate(self) -> float:
        """Events per second the generators had acknowledged."""
        generated = [m for m in self.messages if m[0] == "generated"]
        return sum(m[1] for m in generated) / max(m[2] for m in generated)

    @property
    def cpu(self) -> float:
        """CPU the generators used, in cores."""
        return sum(m[3] / m[2] for m in self.messages if m[0] == "generated")

    @property
    def problems(self) -> list[str]:
        return ([m[4] for m in self.messages if m[0] == "generated" and m[4]]
                + [e for m in self.messages if m[0] == "probes" for e in m[2]])


# -- reading gold: replay the Delta log, each added file read once --------------------------------------

@dataclass
class GoldLog:
    """Replays the JSON commits of a Delta table from version 0 (nothing is cleaned up in a short run).

    For every version: its commit time (mtime of the commit file), the sum of ``view_count`` of the live
    non-probe rows, and the probes whose row first appears in it.
    """

    path: Path
    version: int = -1
    live: dict[str, int] = field(default_factory=dict)
    versions: list[tuple[float, int]] = field(default_factory=list)  # (commit time, events in gold)
    first_seen: dict[str, float] = field(default_factory=dict)

    def advance(self) -> None:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        while True:
            commit = self.path / "_delta_log" / f"{self.version + 1:020d}.json"
            try:
                mtime, text = commit.stat().st_mtime, commit.read_text()
            except FileNotFoundError:
                return
            for line in text.splitlines():
                action = json.loads(line)
                if "add" in action:
                    if action["add"].get("deletionVector"):
                        raise RuntimeError(f"{commit}: deletion vectors are not handled by this benchmark")
                    name = self._file(action["add"]["path"])
                    table = pq.read_table(name, columns=["product_id", "view_count"])
                    probe = pc.fill_null(pc.starts_with(table["product_id"], PROBE), False)
                    for product in table["product_id"].filter(probe).to_pylist():
                        self.first_seen.setdefault(product, mtime)
                    total = pc.sum(table["view_count"].filter(pc.invert(probe))).as_py()
                    self.live[name] = int(total or 0)
                elif "remove" in action:
                    self.live.pop(self._file(action["remove"]["path"]), None)
            self.version += 1
            self.versions.append((mtime, sum(self.live.values())))

    def _file(self, path: str) -> str:
        if "://" in path or path.startswith("file:"):
            return unquote(urlparse(path).path)
        return str(self.path / unquote(path))

    @property
    def events(self) -> int:
        return self.versions[-1][1] if self.versions else 0

    def events_at(self, moment: float) -> int:
        """Events in gold at ``moment`` (by commit time)."""
        return max((total for at, total in self.versions if at <= moment), default=0)

    def first_with(self, events: int) -> float | None:
        """Commit time of the first version holding at least ``events`` events."""
        return next((at for at, total in self.versions if total >= events), None)


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


class Deltaflow:
    """examples/clickstream, in process, continuous (per-flow triggers when ``intervals`` are given)."""

    name = "deltaflow"

    def __init__(self, spark: Any, root: Path, bootstrap: str, topic: str,
                 intervals: dict[str, str] | None = None, max_offsets: int | None = None) -> None:
        self.spark, self.root, self.bootstrap, self.topic = spark, root, bootstrap, topic
        self.intervals, self.max_offsets = intervals, max_offsets
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
        if self.intervals:  # per-flow trigger intervals, declared in the spec as a user would
            stage = {"bronze_clicks": "bronze", "silver_clicks": "silver", GOLD: "gold"}
            flows = "".join(f"    {name}: {{interval: {self.intervals[part]}}}\n"
                            for name, part in stage.items())
            spec = project / "deltaflow.yml"
            spec.write_text(spec.read_text() + f"  flows:\n{flows}")
        pipeline = Pipeline.load(project, spark=self.spark,
                                 env={"DELTAFLOW_STORAGE": str(self.root / "storage"),
                                      "DELTAFLOW_KAFKA": self.bootstrap})
        self.gold = Path(pipeline.layout.table(GOLD))
        self.stopping = threading.Event()
        self.run = pipeline.start("continuous")
        self.thread = threading.Thread(target=self._wait, name="deltaflow-run", daemon=True)
        self.thread.start()

    def _wait(self) -> None:
        self.outcomes = self.run.wait(self.stopping)

    def stage_queries(self) -> dict[str, Any]:
        names = {"bronze": "bronze_clicks", "silver": "silver_clicks", "gold": GOLD}
        return {stage: self.run.queries[name] for stage, name in names.items() if name in self.run.queries}

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
                 intervals: dict[str, str] | None = None, max_offsets: int | None = None) -> None:
        self.spark, self.root, self.bootstrap, self.topic = spark, root, bootstrap, topic
        self.intervals, self.max_offsets = intervals, max_offsets
        self.gold = root / "delta" / "gold" / "hourly_product_metrics"
        self.queries: list[Any] = []

    def _write(self, df: Any, stage: str, path: Path, mode: str = "append") -> None:
        writer = (df.writeStream.format("delta").outputMode(mode)
                  .option("checkpointLocation", str(self.root / "checkpoints" / stage)))
        if self.intervals:
            writer = writer.trigger(processingTime=self.intervals[stage])
        self.queries.append(writer.start(str(path)))

    def start(self) -> None:
        from pyspark.sql.functions import (
            approx_count_distinct,
            col,
            count,
            current_timestamp,
            from_json,
            to_date,
            window,
        )
        from pyspark.sql.functions import sum as sum_

        spark = self.spark
        bronze = self.root / "delta" / "bronze" / "clickstream"
        silver = self.root / "delta" / "silver" / "clickstream"
        reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", self.bootstrap)
                  .option("subscribe", self.topic).option("startingOffsets", "earliest"))
        if self.max_offsets:  # only to measure throughput (the seed sets no limit)
            reader = reader.option("maxOffsetsPerTrigger", str(self.max_offsets))
        raw_events = (reader.load()
                      .select(from_json(col("value").cast("string"), EVENT_SCHEMA).alias("e")).select("e.*"))
        # The seed starts the three jobs against tables that already exist: create them (empty) first.
        spark.createDataFrame([], raw_events.schema).write.format("delta").save(str(bronze))
        self._write(raw_events, "bronze", bronze)

        silver_stream = (spark.readStream.format("delta").load(str(bronze))
                         .filter(col("event_type").isNotNull())
                         .filter(col("user_id").isNotNull())
                         .withColumn("event_date", to_date("event_timestamp"))
                         .withColumn("processed_at", current_timestamp()))
        spark.createDataFrame([], silver_stream.schema).write.format("delta").save(str(silver))
        self._write(silver_stream, "silver", silver)

        hourly_metrics = (spark.readStream.format("delta").load(str(silver))
                          .withWatermark("event_timestamp", "1 hour")
                          .groupBy(window("event_timestamp", "1 hour"), "product_id")
                          .agg(count("*").alias("view_count"),
                               approx_count_distinct("user_id").alias("unique_users"),  # countDistinct: n/a
                               sum_("revenue").alias("total_revenue")))
        self._write(hourly_metrics, "gold", self.gold, mode="complete")

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


Contestant = Callable[..., Deltaflow | HandWritten]


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
                 max_offsets: int) -> tuple[float, str]:
    """Events/s from Kafka to gold while the pipeline works through ``events`` waiting in ``topic``.

    The backlog flows in bronze batches of ``max_offsets``, so that gold commits several times: the rate is
    the events gold gained from its first commit with data to the commit that holds them all, over the
    time between the two commits (start-up and the pipeline's fixed latency left out).
    """
    job = make(spark, root, bootstrap, topic, max_offsets=max_offsets)
    began = time.time()
    job.start()
    log = GoldLog(job.gold)
    try:
        wait_for(log, job, lambda: log.events >= events, 900, f"{events:,} events in gold")
        first_batch = first_input(job.stage_queries()["bronze"])
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

@dataclass
class Cell:
    contestant: str
    fraction: float
    rate: float
    triggers: str
    freshness: list[float] = field(default_factory=list)  # seen probes, in produce order
    unseen: list[float] = field(default_factory=list)  # lower bounds: probes not seen before the stop
    sent: int = 0
    input_rate: float = 0.0
    generator_cpu: float = 0.0
    gold_rate: float = 0.0
    batch_seconds: dict[str, float] = field(default_factory=dict)  # median batch duration per stage
    error: str | None = None

    def quantile(self, q: float) -> tuple[float, bool]:
        """The ``q`` quantile (linear between closest ranks) and whether it is only a lower bound.

        An unseen probe counts with its lower bound (the wait until the stop); a quantile is a lower bound
        when such a probe is at or below one of the ranks it interpolates between.
        """
        data = sorted([(value, False) for value in self.freshness] + [(value, True) for value in self.unseen])
        if not data:
            return math.nan, False
        position = q * (len(data) - 1)
        low = math.floor(position)
        high = min(low + 1, len(data) - 1)
        value = data[low][0] + (data[high][0] - data[low][0]) * (position - low)
        return value, any(censored for _, censored in data[: high + 1])


def run_cell(spark: Any, make: Contestant, cell: Cell, root: Path, bootstrap: str, topic: str,
             args: argparse.Namespace, intervals: dict[str, str] | None) -> Cell:
    create_topic(bootstrap, topic, partitions=3)
    job = make(spark, root, bootstrap, topic, intervals)
    job.start()
    duration, drain = args.duration, args.drain
    if intervals:
        gold_seconds = float(intervals["gold"].split()[0]) / 1000
        bronze_seconds = float(intervals["bronze"].split()[0]) / 1000
        duration = max(duration, 3 * gold_seconds)
        drain += gold_seconds + 2 * bronze_seconds
    count = max(1, int(duration / args.probe_interval))
    load = Load(bootstrap, topic, cell.rate, probes=(args.probe_interval, count))
    log = GoldLog(job.gold)
    sent: list[tuple[str, float]] = []
    try:
        wait_for(log, job, lambda: log.events > 0, 300, "first events in gold")
        time.sleep(args.settle)
        load.go.set()
        probes_from = time.time()
        wait_for(log, job, lambda: load.probes() is not None, duration + 60, "end of probes", poll=1.0)
        probes_until = time.time()
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


# -- output ----------------------------------------------------------------------------------------------

def versions_line(spark: Any) -> str:
    from importlib.metadata import version

    from deltaflow.runtime.jars import jar_dir

    kafka = sorted(jar_dir("kafka-broker").glob("kafka_2.13-*.jar"))
    broker = kafka[0].name.removeprefix("kafka_2.13-").removesuffix(".jar") if kafka else "?"
    java = spark.sparkContext._jvm.java.lang.System.getProperty("java.version")
    packages = ", ".join(f"{name} {version(name)}" for name in
                         ("deltaflow", "pyspark", "delta-spark", "deltalake", "confluent-kafka", "pyarrow"))
    return f"Python {platform.python_version()}, Java {java}, Kafka broker {broker}, {packages}"


def machine_line() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{platform.machine()}, {os.cpu_count()} cores, {memory:.0f} GiB RAM, {platform.system()} "
            f"{platform.release()}; load average at start {load}")


def seconds(quantile: tuple[float, bool]) -> str:
    value, lower_bound = quantile
    return "     -" if math.isnan(value) else f"{'≥' if lower_bound else ''}{value:.2f}".rjust(6)


def print_cells(cells: list[Cell]) -> None:
    print(f"{'rate':>14} {'contestant':13} {'triggers':15} {'p50 s':>6} {'p99 s':>6} {'max s':>6} "
          f"{'seen/sent':>9} {'input/s':>8} {'gold/input':>10} {'p50 halves':>12} {'batch s b/s/g':>15} "
          f"{'gen CPU':>7}")
    for cell in cells:
        if cell.error:
            print(f"{cell.rate:>8,.0f} ({cell.fraction:.0%}) {cell.contestant:13} FAILED: {cell.error}")
            continue
        half = len(cell.freshness) // 2
        first, second = cell.freshness[:half], cell.freshness[half:]
        drift = f"{statistics.median(first):.1f}→{statistics.median(second):.1f}" if half else "-"
        batches = "/".join(f"{cell.batch_seconds.get(s, math.nan):.1f}" for s in ("bronze", "silver", "gold"))
        print(f"{cell.rate:>8,.0f} ({cell.fraction:.0%}) {cell.contestant:13} {cell.triggers:15} "
              f"{seconds(cell.quantile(0.5))} {seconds(cell.quantile(0.99))} {seconds(cell.quantile(1.0))} "
              f"{len(cell.freshness):>4}/{cell.sent:<4} {cell.input_rate:>8,.0f} "
              f"{cell.gold_rate / cell.input_rate if cell.input_rate else math.nan:>10.2f} {drift:>12} "
              f"{batches:>15} {cell.generator_cpu:>7.0%}")


def print_ratios(cells: list[Cell]) -> None:
    by_key: dict[tuple[float, str], dict[str, Cell]] = {}
    for cell in cells:
        by_key.setdefault((cell.fraction, cell.triggers), {})[cell.contestant] = cell
    for (fraction, triggers), pair in by_key.items():
        ours, theirs = pair.get("deltaflow"), pair.get("hand-written")
        if not ours or not theirs or ours.error or theirs.error or not ours.sent or not theirs.sent:
            print(f"  {fraction:.0%} of base, triggers {triggers}: no ratio (a contestant failed)")
            continue
        ratios = []
        for q in (0.5, 0.99):
            (mine, mine_bound), (other, other_bound) = ours.quantile(q), theirs.quantile(q)
            sign = {(False, False): "", (True, False): "≥", (False, True): "≤"}.get((mine_bound, other_bound))
            ratios.append("?" if sign is None else f"{sign}{mine / other:.2f}x")
        print(f"  {fraction:.0%} of base, triggers {triggers}: deltaflow / hand-written freshness "
              f"p50 {ratios[0]}, p99 {ratios[1]}  (lower is fresher; >1: deltaflow is staler)")


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
        return self.tmp / f"{self.count:02d}-{label}"


def measure_base(spark: Any, bootstrap: str, runs: Runs, backlog: int, top: float,
                 contestants: list[Contestant]) -> float:
    """Backlog throughput of each whole pipeline while the cells' load generators run; the lower one."""
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
    print("\nhighest sustainable rate = throughput of the whole pipeline (Kafka -> bronze -> silver -> gold) "
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
    return base


def run_cells(spark: Any, bootstrap: str, runs: Runs, base: float, args: argparse.Namespace,
              contestants: list[Contestant]) -> list[Cell]:
    fractions = [float(f) for f in args.fractions.split(",")]
    plan: list[tuple[float, float | None]] = [(f, None) for f in fractions]
    if args.seed_scale:
        plan.append((fractions[0], args.seed_scale))
    cells: list[Cell] = []
    for index, (fraction, scale) in enumerate(plan):
        intervals = stage_intervals(scale)
        triggers = "0 s (seed 000)"
        if intervals:
            stages = ("bronze", "silver", "gold")
            triggers = "/".join(f"{float(intervals[s].split()[0]) / 1000:g}" for s in stages) + " s"
        for make in contestants if index % 2 == 0 else contestants[::-1]:
            cell = Cell(make.name, fraction, base * fraction, triggers)
            print(f"cell: {make.name} at {cell.rate:,.0f} events/s ({fraction:.0%}), triggers {triggers} "
                  "... ", end="", flush=True)
            root = runs.root(make.name)
            run_cell(spark, make, cell, root, bootstrap, f"fresh-{root.name}", args, intervals)
            p50 = seconds(cell.quantile(0.5)).strip()
            print(f"p50 {p50} s" if not cell.error else f"FAILED: {cell.error}")
            cells.append(cell)
    return cells


def print_report(cells: list[Cell], args: argparse.Namespace) -> None:
    print(f"\nfreshness = commit time of the first gold version holding the probe's row - its produce time; "
          f"one probe every {args.probe_interval:g} s for {args.duration:g} s per cell (seed-trigger cells: "
          f">= 3 gold intervals), after {args.settle:g} s of load.\nWith < 100 probes p99 is close to the "
          "max.")
    print("deltaflow: examples/clickstream as shipped (silver deduplicates; gold exact countDistinct, "
          "refreshed by window).\nhand-written: seed 000's three jobs, bronze from Kafka with from_json, no "
          "dedup, gold in complete mode with approx_count_distinct\n  (approximate: Spark has no streaming "
          "countDistinct).")
    print("gold/input: events reaching gold per second during the probes / events produced per second "
          "(~1.00: kept up; < 1: falling behind).\n"
          "p50 halves: p50 of the first and second half of the probes (a trend: still catching up, or "
          "falling behind).\n"
          "batch s: median duration of the micro-batches of bronze/silver/gold during the probes.\n"
          "gen CPU: the load generators' CPU, in cores.\n")
    print_cells(cells)
    print("\nnote: deltaflow's gold recomputes every silver row of the hours a batch touches (exact distinct "
          "counts), so its gold batches\ngrow with the rows of the current hour; each cell starts on empty "
          "tables, i.e. these are the first minutes of an hour.\n")
    print_ratios(cells)
    if args.seed_scale:
        scaled = grid_model(60 * args.seed_scale, 60 * args.seed_scale, 300 * args.seed_scale)
        real = grid_model(60, 60, 300)
        print("\nseed triggers: the orders example's processing-time triggers, 1 min (bronze, silver) / "
              f"5 min (gold), scaled by {args.seed_scale:g} so that a cell sees several gold triggers.\n"
              "Such triggers fire on a fixed grid and an event waits for the next bronze, then silver, then "
              "gold trigger: the grid alone (a model, no processing time)\n"
              f"  gives {scaled[1]:.1f} s mean, {scaled[0]:.1f}-{scaled[2]:.1f} s, at the scaled intervals "
              "(compare the measured cells above),\n"
              f"  and {real[1] / 60:.1f} min mean, {real[0] / 60:.1f}-{real[2] / 60:.1f} min, at the real "
              "ones - not measured here; --seed-scale 1 --duration 900 measures it.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=75, help="seconds of probes per cell")
    parser.add_argument("--probe-interval", type=float, default=1.0, help="seconds between probes")
    parser.add_argument("--settle", type=float, default=20,
                        help="seconds of load after gold's first rows, before the first probe")
    parser.add_argument("--drain", type=float, default=30, help="seconds to wait for the last probes")
    parser.add_argument("--fractions", default="0.5,0.8", help="input rates, as fractions of the base rate")
    parser.add_argument("--backlog", type=int, default=300_000, help="events for the throughput measurement")
    parser.add_argument("--rate", type=float, help="base rate (events/s) instead of measuring it")
    parser.add_argument("--seed-scale", type=float, default=0.1,
                        help="scale of the seed's 1 min / 5 min triggers for the extra cells (0: skip them)")
    parser.add_argument("--quick", action="store_true", help="smoke run: ~20 s cells, small backlog")
    args = parser.parse_args()
    if args.quick:
        args.duration, args.settle, args.drain, args.backlog = 20, 8, 20, 150_000
        args.seed_scale = min(args.seed_scale, 0.02) if args.seed_scale else 0
    began = time.monotonic()

    from deltaflow.runtime.session import build_session

    print(f"machine: {machine_line()}")
    contestants: list[Contestant] = [Deltaflow, HandWritten]
    with tempfile.TemporaryDirectory(prefix="deltaflow-fresh-") as tmp_name:
        tmp = Path(tmp_name)
        with EmbeddedKafka(state_dir=tmp / "kafka", port=free_port()) as broker:
            bootstrap = broker.status().bootstrap or ""
            spark = build_session(extra={"spark.sql.warehouse.dir": str(tmp / "wh")})
            print(f"versions: {versions_line(spark)}")
            print(f"spark: {spark.conf.get('spark.master')}, shuffle partitions "
                  f"{spark.conf.get('spark.sql.shuffle.partitions')}, driver memory "
                  f"{spark.conf.get('spark.driver.memory')}; one session for both contestants, one at a time")
            runs = Runs(tmp)
            if args.rate:
                base = args.rate
                print(f"\nbase rate: {base:,.0f} events/s, given with --rate (not measured)")
            else:
                top = max(float(f) for f in args.fractions.split(","))
                base = measure_base(spark, bootstrap, runs, args.backlog, top, contestants)
            cells = run_cells(spark, bootstrap, runs, base, args, contestants)
            spark.stop()
    print_report(cells, args)
    print(f"\ntotal time {time.monotonic() - began:.0f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
