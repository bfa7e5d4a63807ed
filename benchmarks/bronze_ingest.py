"""Kafka -> bronze throughput: deltaflow vs a hand-written PySpark job (seed 004 style), one run.

Both jobs read the same 3-partition topic of ~200-byte JSON events from the embedded broker, with the
same trigger (availableNow) and the same maxOffsetsPerTrigger, into fresh Delta tables, alternating
rounds in one SparkSession. Prints events/s for each and the ratio, then the time from `deltaflow run`
start (a new process, JVM included) to the first committed batch.

    .venv/bin/python benchmarks/bronze_ingest.py [--events 1000000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from deltaflow.dev.broker import EmbeddedKafka
from deltaflow.dev.generator import clickstream_event, produce
from deltaflow.dev.topics import create_topic
from deltaflow.pipeline import Pipeline
from deltaflow.runtime.session import build_session
from results import Figure, save

TOPIC = "bench_clicks"


def sustained(progress: list) -> float:  # type: ignore[type-arg]
    """Rows per second of batch execution: rows of all batches over the time spent running them."""
    rows = sum(p.numInputRows for p in progress)
    seconds = sum(p.durationMs.get("triggerExecution", 0) for p in progress) / 1000
    return rows / seconds


def event_payloads(count: int, size: int) -> list[bytes]:
    """Clickstream events (seed 000 fields) serialized as JSON of exactly ``size`` bytes."""
    rng = random.Random(7)
    now = datetime.now(UTC)
    keep = ("event_id", "user_id", "product_id", "event_type", "event_timestamp", "revenue")
    payloads = []
    for _ in range(count):
        event = {k: v for k, v in clickstream_event(rng, now).items() if k in keep}
        body = json.dumps(event, separators=(",", ":"))
        pad = size - len(body) - len(',"pad":""')
        payloads.append((body[:-1] + f',"pad":"{"x" * max(pad, 0)}"}}').encode())
    return payloads


def hand_written(spark, bootstrap: str, out: Path, max_offsets: int,  # type: ignore[no-untyped-def]
                 same_columns: bool = False) -> tuple[float, float]:
    """Seed 004's raw landing job, verbatim in spirit. Returns (wall seconds, sustained rows/s).

    With ``same_columns`` it lands what deltaflow lands (key, UTF-8 checked text, original bytes when not
    UTF-8), to separate the cost of those columns from the cost of the framework.
    """
    start = time.perf_counter()
    progress = landing_job(spark, bootstrap, str(out), max_offsets, same_columns)
    return time.perf_counter() - start, sustained(progress)


def landing_job(spark, bootstrap: str, root: str, max_offsets: int,  # type: ignore[no-untyped-def]
                same_columns: bool = False) -> list:  # type: ignore[type-arg]
    """Run :func:`hand_written`'s job into ``root`` (a folder or a URI) to the end; its batches' progress."""
    from pyspark.sql import functions as F
    from pyspark.sql.functions import col, current_timestamp

    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", TOPIC).option("startingOffsets", "earliest")
           .option("maxOffsetsPerTrigger", str(max_offsets)).load())
    landed = raw.select(col("topic"), col("partition"), col("offset"), col("timestamp").alias("kafka_ts"),
                        col("value").cast("string").alias("raw_payload"),
                        current_timestamp().alias("arrived_at"))
    if same_columns:
        def text(c: str):  # type: ignore[no-untyped-def]
            as_text = col(c).cast("string")
            return F.coalesce(F.try_validate_utf8(as_text), F.make_valid_utf8(as_text))

        def original(c: str):  # type: ignore[no-untyped-def]
            return F.when(F.try_validate_utf8(col(c).cast("string")).isNull(), col(c))

        landed = raw.select("topic", "partition", "offset", "timestamp", text("key").alias("key"),
                            text("value").alias("value"), original("key").alias("key_bytes"),
                            original("value").alias("value_bytes"), current_timestamp().alias("ingested_at"))
    query = (landed.writeStream.format("delta").outputMode("append")
             .option("checkpointLocation", f"{root}/_checkpoint").trigger(availableNow=True)
             .start(f"{root}/table"))
    query.awaitTermination()
    return list(query.recentProgress)


def write_project(root: Path, bootstrap: str, max_offsets: int, storage: str = "./storage",
                  spec_extra: str = "") -> Path:
    """A one-table project landing the topic in ``storage``; its ``deltaflow.yml``."""
    (root / "transformations").mkdir(parents=True)
    (root / "transformations" / "bronze.py").write_text(
        "import deltaflow as dp\n\n\n@dp.table\ndef bronze_clicks():\n"
        f"    return dp.read_kafka('{TOPIC}', max_offsets_per_trigger={max_offsets})\n")
    (root / "deltaflow.yml").write_text(
        f"name: bench\nstorage: {storage}\nlibraries: [transformations/*.py]\n"
        f"kafka:\n  bootstrap_servers: {bootstrap}\n{spec_extra}")
    return root / "deltaflow.yml"


def deltaflow_job(spark, project: Path) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    run = Pipeline.load(project, spark=spark).start("available_now")
    run.finish(threading.Event())
    return time.perf_counter() - start, sustained(run.queries["bronze_clicks"].recentProgress)


def time_to_first_batch(project: Path) -> float:
    log = Path(Pipeline.load(project).layout.table("bronze_clicks")) / "_delta_log"
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "deltaflow", "run", "--available-now", "--quiet",
                             "--spec", str(project)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not (log / f"{1:020d}.json").exists():  # version 0 creates the table, 1 is the first batch
            if proc.poll() is not None:
                raise RuntimeError("deltaflow run exited before committing a batch")
            time.sleep(0.01)
        return time.perf_counter() - start
    finally:
        proc.wait(timeout=600)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="first rounds not counted (JIT warm-up)")
    parser.add_argument("--max-offsets", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=200, help="bytes per JSON event")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="deltaflow-bench-") as tmp_name:
        tmp = Path(tmp_name)
        with EmbeddedKafka(state_dir=tmp / "kafka", port=free_port()) as broker:
            bootstrap = broker.status().bootstrap or ""
            create_topic(bootstrap, TOPIC, partitions=3)
            payloads = event_payloads(args.events, args.size)
            size = statistics.mean(len(p) for p in payloads[:10_000])
            t0 = time.perf_counter()
            produce(bootstrap, TOPIC, payloads)
            print(f"produced {args.events:,} events of ~{size:.0f} bytes in {time.perf_counter() - t0:.1f} s")

            spark = build_session(extra={"spark.sql.warehouse.dir": str(tmp / "wh")})
            jobs = ["hand-written", "deltaflow", "hand-written, deltaflow's columns"]
            results: dict[str, list[float]] = {name: [] for name in jobs}
            walls: dict[str, list[float]] = {name: [] for name in jobs}
            for r in range(args.warmup + args.rounds):
                for name in jobs[r % 3:] + jobs[:r % 3]:
                    out = tmp / f"{name.replace(' ', '_')}-{r}"
                    if name.startswith("hand-written"):
                        seconds, rate = hand_written(spark, bootstrap, out, args.max_offsets,
                                                     same_columns=name != "hand-written")
                    else:
                        seconds, rate = deltaflow_job(spark, write_project(out, bootstrap, args.max_offsets))
                    if r >= args.warmup:
                        results[name].append(rate)
                        walls[name].append(args.events / seconds)
                    label = "warm-up" if r < args.warmup else f"round {r - args.warmup + 1}"
                    print(f"{label}: {name:34s} sustained {rate:>9,.0f} events/s, "
                          f"wall {seconds:5.1f} s ({args.events / seconds:,.0f} events/s incl. start/stop)")
            spark.stop()

            hand = statistics.median(results["hand-written"])
            ours = statistics.median(results["deltaflow"])
            first = time_to_first_batch(write_project(tmp / "first-batch", bootstrap, 10_000))
        print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cores; "
              f"events={args.events:,}, maxOffsetsPerTrigger={args.max_offsets:,}")
        print(f"sustained, hand-written PySpark: {hand:,.0f} events/s (median of {args.rounds})")
        same = statistics.median(results[jobs[2]])
        print(f"sustained, deltaflow:            {ours:,.0f} events/s (median of {args.rounds})")
        print(f"sustained, hand-written landing deltaflow's columns: {same:,.0f} events/s")
        print(f"ratio deltaflow / hand-written: {ours / hand:.2f}x sustained, "
              f"{statistics.median(walls['deltaflow']) / statistics.median(walls['hand-written']):.2f}x "
              "wall clock (with query start/stop)")
        print(f"ratio deltaflow / hand-written with the same columns: {ours / same:.2f}x sustained")
        print(f"deltaflow run start -> first committed batch of 10,000 events: {first:.1f} s "
              "(new process, JVM start included)")
    seed = "hand-written (seed 004)"
    save("bronze_ingest", "Kafka -> bronze, bytes kept: deltaflow vs the seed-004 job", [
        Figure("sustained ingest", "events/s", results["deltaflow"], results["hand-written"], seed,
               higher_is_better=True, target=1.0, target_text="≥ 1.0× the seed-004 job, bytes still kept"),
        Figure("ingest, wall clock with query start/stop", "events/s", walls["deltaflow"],
               walls["hand-written"], seed, higher_is_better=True),
        Figure("sustained ingest, same columns as deltaflow", "events/s", results["deltaflow"],
               results[jobs[2]], "hand-written landing deltaflow's columns", higher_is_better=True),
    ], notes=[f"{args.events:,} events of ~{size:.0f} bytes, maxOffsetsPerTrigger {args.max_offsets:,}; "
              f"medians of {args.rounds} rounds after {args.warmup} warm-up round(s). deltaflow run start -> "
              f"first committed batch: {first:.1f} s (new process)."])


if __name__ == "__main__":
    main()
