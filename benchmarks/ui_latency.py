"""The dashboard at 10,000 logged batches: how fast ``/api/state`` and ``/metrics`` answer.

An event log of 10,000 batches (three flows, a batch a second each) is written through the event log's own
writer in 3,334 appends, as a continuous run's writer thread would (it compacts every 100 appends). The
dashboard (``deltaflow ui``'s server, on loopback) is then asked, in each round:

* ``/api/state`` and ``/metrics`` just after one more append (the log changed: it is read again);
* ``/api/state`` with nothing new (served from what it read).

The baseline is what a user without deltaflow would run for the same figures: a warm SparkSession reading
the event log's Delta table and summing rows, batches and durations per flow. Contestants alternate which
goes first; the first round is a warm-up and is not counted; medians and spread of the rest.

    .venv/bin/python benchmarks/ui_latency.py [--batches 10000] [--rounds 8]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from results import Figure, machine_line, save


def fetch(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url) as response:
        response.read()
    return (time.perf_counter() - started) * 1000


def spark_summary(spark: Any, log: str) -> float:
    from pyspark.sql import functions as F

    started = time.perf_counter()
    (spark.read.format("delta").load(log).where(F.col("kind") == "batch").groupBy("flow")
     .agg(F.count("*"), F.sum("input_rows"), F.sum("duration_ms")).collect())
    return (time.perf_counter() - started) * 1000


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):,.0f} ms (min {min(values):,.0f}, max {max(values):,.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    print(machine_line(), flush=True)

    from deltaflow.dev.sample_log import write_batches
    from deltaflow.pipeline import Pipeline
    from deltaflow.runtime.event_log import batch_event
    from deltaflow.runtime.session import build_session

    with tempfile.TemporaryDirectory(prefix="ui-latency-") as tmp:
        root = Path(tmp)
        (root / "deltaflow.yml").write_text("name: bench\nstorage: ./storage\nlibraries: [t/*.py]\n")
        pipeline = Pipeline.load(root / "deltaflow.yml")
        layout = pipeline.layout
        started = time.perf_counter()
        appends = -(-args.batches // 3)
        write_batches(layout, args.batches, appends)
        files = len(layout.open_table(layout.event_log).file_uris())
        print(f"event log: {args.batches:,} batches in {appends:,} appends, {files} files, "
              f"written in {time.perf_counter() - started:.0f} s", flush=True)
        server = pipeline.serve_ui(port=0)
        spark = build_session()
        from deltaflow.runtime.event_log import EventLog

        writer = EventLog(layout.event_log, "bench", run_id="sample", trigger="continuous")
        writer.close()
        cold = fetch(server.url + "api/state")
        print(f"first /api/state (cold): {cold:,.0f} ms", flush=True)
        fresh_state: list[float] = []
        fresh_metrics: list[float] = []
        unchanged: list[float] = []
        baseline: list[float] = []
        for round_no in range(args.rounds):
            more = batch_event("bench", "sample", {
                "name": "bronze", "id": "q-bronze", "batchId": args.batches + round_no, "numInputRows": 5,
                "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
                "durationMs": {"triggerExecution": 100}})

            def ours(more: Any = more) -> tuple[float, float, float]:
                writer._append([more])
                state = fetch(server.url + "api/state")
                writer._append([more])
                return state, fetch(server.url + "metrics"), fetch(server.url + "api/state")

            if round_no % 2 == 0:
                theirs, (state, metrics, same) = spark_summary(spark, layout.event_log), ours()
            else:
                (state, metrics, same), theirs = ours(), spark_summary(spark, layout.event_log)
            print(f"round {round_no}: /api/state {state:,.0f} ms, /metrics {metrics:,.0f} ms, unchanged "
                  f"{same:,.0f} ms; Spark query {theirs:,.0f} ms", flush=True)
            if round_no == 0:
                continue  # warm-up
            fresh_state.append(state)
            fresh_metrics.append(metrics)
            unchanged.append(same)
            baseline.append(theirs)
        server.stop()
        spark.stop()
    print(f"\n/api/state after a new batch: {spread(fresh_state)}\n/metrics after a new batch: "
          f"{spread(fresh_metrics)}\n/api/state, nothing new: {spread(unchanged)}\n"
          f"warm Spark query of the log: {spread(baseline)}")
    against = "a warm SparkSession summing the event log per flow"
    title = f"The dashboard at {args.batches:,} logged batches, against a Spark query of the log"
    save("ui_latency", title, [
        Figure(f"/api/state after a new batch ({args.batches:,} batches)", "ms", fresh_state, baseline,
               against, higher_is_better=False, target_text="well under 1 s"),
        Figure(f"/metrics after a new batch ({args.batches:,} batches)", "ms", fresh_metrics, baseline,
               against, higher_is_better=False, target_text="well under 1 s"),
        Figure("/api/state, nothing new", "ms", unchanged, baseline, against, higher_is_better=False),
    ], notes=[f"The log: {args.batches:,} batches in {appends:,} appends, {files} files after the writer's "
              f"compactions; the first (cold) /api/state took {cold:,.0f} ms."])


if __name__ == "__main__":
    main()
