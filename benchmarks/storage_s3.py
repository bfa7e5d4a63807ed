"""Storage on the local S3 server (moto) vs local disk: bronze ingest and the medallion, vs hand-written.

Bronze ingest: four contestants read the same topic (``--events`` JSON events of ~200 bytes, 3
partitions) into a fresh Delta table each round, availableNow with the same maxOffsetsPerTrigger, in one
SparkSession whose S3A points at the local S3 server: the hand-written seed-004 landing job and a one-table
deltaflow pipeline, each on local disk and on S3. Rounds rotate the order; the first is a warm-up. Printed:
events/s (median and spread of the batches' own time), the ratios, where a batch's time goes (Spark's
durationMs: addBatch = data files + Delta commit, walCommit/commitOffsets = the checkpoint's offset and
commit logs, latestOffset, queryPlanning), and the JVM-free ``status`` / ``history`` latency on each storage.

The medallion: the clickstream pipeline working through a backlog of ``--backlog`` events (``freshness.py``'s
measurement: events/s reaching gold between its first commit with data and the one holding them all), the
seed's three hand-written jobs and ``examples/clickstream``, each with every table and checkpoint on local
disk and on S3, in the same session and rotation.

moto is an in-memory Python server on loopback: the S3 figures show the cost of S3's request pattern (a
PUT per file, LISTs for the log, no rename) through a slow server, not the latency of AWS.

    .venv/bin/python benchmarks/storage_s3.py [--events 300000] [--rounds 3] [--max-offsets 50000] \
        [--backlog 60000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bronze_ingest import TOPIC, event_payloads, free_port, landing_job, sustained, write_project
from deltaflow.dev.broker import EmbeddedKafka
from deltaflow.dev.generator import clickstream_event, produce, user_key
from deltaflow.dev.s3_server import ACCESS_KEY, SECRET_KEY, LocalS3
from deltaflow.dev.topics import create_topic
from deltaflow.pipeline import Pipeline
from deltaflow.runtime.session import build_session
from deltaflow.spec import S3Spec
from deltaflow.storage.s3 import hadoop_conf
from freshness import backlog_rate
from freshness_contestants import Deltaflow, HandWritten
from results import machine_line, versions_line

BACKLOG_TOPIC = "backlog"
PARTS = ("addBatch", "walCommit", "commitOffsets", "latestOffset", "queryPlanning", "getBatch")


def project(folder: Path, storage: str, s3: S3Spec, bootstrap: str, max_offsets: int) -> Path:
    """A one-table deltaflow project landing the topic, with its storage at ``storage``."""
    keys = (f"s3: {{endpoint: '{s3.endpoint}', access_key: {s3.access_key}, secret_key: {s3.secret_key}, "
            "path_style: true}\n")
    return write_project(folder, bootstrap, max_offsets, storage, keys).parent


def deltaflow_job(spark: Any, folder: Path) -> list[Any]:
    run = Pipeline.load(folder, spark=spark).start("available_now")
    run.finish(threading.Event())
    return list(run.queries["bronze_clicks"].recentProgress)


def median_seconds(action: Any, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the first a warm-up (at least 2)")
    parser.add_argument("--max-offsets", type=int, default=50_000)
    parser.add_argument("--backlog", type=int, default=60_000,
                        help="clickstream events for the medallion (maxOffsetsPerTrigger a quarter of it)")
    args = parser.parse_args()
    began = time.monotonic()
    print(f"machine: {machine_line()}")
    with tempfile.TemporaryDirectory(prefix="deltaflow-s3-bench-") as tmp_name:
        tmp = Path(tmp_name)
        server = LocalS3(port=free_port(), state_dir=tmp / "s3")
        s3 = S3Spec(endpoint=server.start(["lake"]), access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                    path_style=True)
        try:
            with EmbeddedKafka(state_dir=tmp / "kafka", port=free_port()) as broker:
                bootstrap = broker.status().bootstrap or ""
                create_topic(bootstrap, TOPIC, partitions=3)
                produce(bootstrap, TOPIC, event_payloads(args.events, 200))
                create_topic(bootstrap, BACKLOG_TOPIC, partitions=3)
                rng = random.Random(11)
                produce(bootstrap, BACKLOG_TOPIC,
                        (clickstream_event(rng, datetime.now(UTC)) for _ in range(args.backlog)), user_key)
                spark = build_session(extra={**hadoop_conf(s3), "spark.sql.warehouse.dir": str(tmp / "wh")})
                spark.sparkContext.setLogLevel("ERROR")
                print(f"versions: {versions_line(spark)}")
                print(f"{args.events:,} events, maxOffsetsPerTrigger {args.max_offsets:,}\n")
                measured = run_rounds(spark, tmp, s3, bootstrap, args)
                medallion = medallion_rounds(spark, tmp, s3, bootstrap, args)
                spark.stop()
                report(measured, args.rounds - 1)
                report_medallion(medallion, args)
                reads(tmp, s3, measured)
        finally:
            server.stop()
    print(f"\nTotal {time.monotonic() - began:.0f} s")


Measured = dict[str, dict[str, Any]]


def run_rounds(spark: Any, tmp: Path, s3: S3Spec, bootstrap: str, args: argparse.Namespace) -> Measured:
    names = ["hand-written, local", "hand-written, S3", "deltaflow, local", "deltaflow, S3"]
    measured: Measured = {n: {"rates": [], "parts": {p: [] for p in PARTS}, "last": ""} for n in names}
    for round_ in range(args.rounds):
        order = names[round_ % 4:] + names[:round_ % 4]
        for name in order:
            local = name.endswith("local")
            tag = uuid.uuid4().hex[:8]
            root = str(tmp / f"r{round_}-{tag}") if local else f"s3a://lake/{tag}"
            if name.startswith("hand"):
                progress = landing_job(spark, bootstrap, root, args.max_offsets)
            else:
                folder = project(tmp / f"p{round_}-{tag}", root, s3, bootstrap, args.max_offsets)
                progress = deltaflow_job(spark, folder)
                measured[name]["last"] = str(folder)
            if round_:
                batches = [p for p in progress if p.numInputRows]
                measured[name]["rates"].append(sustained(batches))
                for part in PARTS:
                    measured[name]["parts"][part] += [p.durationMs.get(part, 0) for p in batches]
        print(f"round {round_}{' (warm-up)' if not round_ else ''}: {', '.join(order)}")
    return measured


def medallion_rounds(spark: Any, tmp: Path, s3: S3Spec, bootstrap: str,
                     args: argparse.Namespace) -> dict[str, list[float]]:
    names = ["hand-written, local", "hand-written, S3", "deltaflow, local", "deltaflow, S3"]
    rates: dict[str, list[float]] = {n: [] for n in names}
    for round_ in range(args.rounds):
        order = names[round_ % 4:] + names[:round_ % 4]
        for name in order:
            tag = uuid.uuid4().hex[:8]
            root = tmp / f"m{round_}-{tag}"
            storage = None if name.endswith("local") else f"s3a://lake/{tag}"
            make = HandWritten if name.startswith("hand") else Deltaflow
            rate, how = backlog_rate(spark, make, root, bootstrap, BACKLOG_TOPIC, args.backlog,
                                     args.backlog // 4, storage=storage, s3=s3)
            if round_:
                rates[name].append(rate)
            print(f"medallion round {round_}{' (warm-up)' if not round_ else ''}, {name}: {rate:,.0f} "
                  f"events/s ({how})")
    return rates


def report_medallion(rates: dict[str, list[float]], args: argparse.Namespace) -> None:
    print(f"\nthe medallion through a backlog of {args.backlog:,} events (maxOffsetsPerTrigger "
          f"{args.backlog // 4:,}):\n\n| contestant | events/s to gold, median of {args.rounds - 1} "
          "(spread) | vs hand-written, same storage | S3 vs local |\n|---|---|---|---|")
    median = {n: statistics.median(r) for n, r in rates.items()}
    for name, r in rates.items():
        who, where = name.split(", ")
        print(f"| {name} | {median[name]:,.0f} ({min(r):,.0f}-{max(r):,.0f}) | "
              f"{median[name] / median[f'hand-written, {where}']:.2f}x | "
              f"{median[name] / median[f'{who}, local']:.2f}x |")


def report(measured: Measured, rounds: int) -> None:
    print(f"\n| contestant | events/s, median of {rounds} (spread) | vs hand-written, same storage | "
          "S3 vs local |\n|---|---|---|---|")
    median = {n: statistics.median(m["rates"]) for n, m in measured.items()}
    for name, m in measured.items():
        hand = median[f"hand-written, {name.split(', ')[1]}"]
        local = median[f"{name.split(', ')[0]}, local"]
        print(f"| {name} | {median[name]:,.0f} ({min(m['rates']):,.0f}-{max(m['rates']):,.0f}) | "
              f"{median[name] / hand:.2f}x | {median[name] / local:.2f}x |")
    print("\nwhere a batch's time goes (median ms per batch):\n\n| contestant | "
          + " | ".join(PARTS) + " |\n|---|" + "---|" * len(PARTS))
    for name, m in measured.items():
        print(f"| {name} | " + " | ".join(f"{statistics.median(m['parts'][p] or [0]):,.0f}" for p in PARTS)
              + " |")


def reads(tmp: Path, s3: S3Spec, measured: Measured) -> None:
    """JVM-free status and history of each storage's last deltaflow table: in-process and as a command."""
    print("\n| JVM-free read | local | S3 |\n|---|---|---|")
    folders = {where: measured[f"deltaflow, {where}"]["last"] for where in ("local", "S3")}
    calls = {"status": lambda p: p.status(),
             "history (20 versions)": lambda p: p.history("bronze_clicks", 20)}
    for label, call in calls.items():
        cells = [median_seconds(lambda f=f, c=call: c(Pipeline.load(f))) for f in folders.values()]
        print(f"| {label}, in-process (fresh Pipeline) | {cells[0] * 1000:.0f} ms | "
              f"{cells[1] * 1000:.0f} ms |")
    for verb in (["status"], ["history", "bronze_clicks"]):
        command = [sys.executable, "-m", "deltaflow", *verb, "--spec"]
        cells = [median_seconds(lambda f=f, c=command: subprocess.run([*c, f], check=True,
                                                                     capture_output=True), 3)
                 for f in folders.values()]
        print(f"| `deltaflow {' '.join(verb)}`, new process | {cells[0]:.2f} s | {cells[1]:.2f} s |")


if __name__ == "__main__":
    main()
