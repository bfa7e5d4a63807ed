"""Small files after many micro-batches: compaction and automatic maintenance vs a hand-written stream.

A raw Delta table of ``--batches`` small commits (written with ``deltalake``: readings of 200 sensors) is
streamed into a table one commit per micro-batch (``maxFilesPerTrigger=1``, trigger availableNow) by:

* hand-written: ``readStream`` → ``writeStream.format("delta")``, nothing else (the seeds' job);
* deltaflow, maintenance off: the same as a one-table pipeline;
* deltaflow, maintenance on: ``maintenance: {optimize_every: 100, zorder: {readings: [sensor_id]}}``.

Each round builds the three tables afresh, in an order that rotates from round to round; the first round is
a warm-up over the first ``--warmup-batches`` commits only (it warms the JVM, not the table) and is not
counted. Printed: ingest rows/s (median and spread over the counted rounds, and the
ratios), and, on the last round's tables, the file count and the time of a full scan and of a selective
query (one sensor, the Z-ordered column) before and after ``deltaflow optimize --zorder sensor_id``, and
with maintenance on from the start. Then the latency of ``deltaflow history`` and ``vacuum --dry-run``
against the same answer through Spark (``DeltaTable.history()``, ``VACUUM ... DRY RUN``).

    .venv/bin/python benchmarks/compaction.py [--batches 500] [--rows 2000] [--rounds 3] [--warmup-batches 50]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from deltaflow.pipeline import Pipeline
from deltaflow.runtime.session import build_session
from results import Figure, machine_line, save, versions_line

DEFINITIONS = '''\
import deltaflow as dp

@dp.table
def readings():
    return spark.readStream.format("delta").option("maxFilesPerTrigger", 1).load({raw!r})
'''
MAINTENANCE = "maintenance:\n  optimize_every: 100\n  zorder: {readings: [sensor_id]}\n"
SENSORS = 200
REPEAT = 5


def write_raw(path: str, batches: int, rows: int) -> None:
    """``batches`` commits of ``rows`` readings each, one small file per commit."""
    import pyarrow as pa
    from deltalake import write_deltalake

    for batch in range(batches):
        ids = pa.array(range(batch * rows, (batch + 1) * rows), pa.int64())
        table = pa.table({"id": ids, "sensor_id": pa.array([f"s{i % SENSORS:03d}" for i in ids.to_pylist()]),
                          "value": pa.array([float(i % 997) for i in ids.to_pylist()])})
        write_deltalake(path, table, mode="append")


def hand_written(spark: Any, raw: str, out: Path) -> tuple[str, float]:
    started = time.monotonic()
    query = (spark.readStream.format("delta").option("maxFilesPerTrigger", 1).load(raw).writeStream
             .format("delta").option("checkpointLocation", str(out / "checkpoint"))
             .trigger(availableNow=True).start(str(out / "table")))
    query.awaitTermination()
    return str(out / "table"), time.monotonic() - started


def deltaflow_job(spark: Any, raw: str, out: Path, maintenance: bool) -> tuple[str, float]:
    (out / "transformations").mkdir(parents=True)
    (out / "transformations" / "defs.py").write_text(DEFINITIONS.format(raw=raw))
    spec = "name: compaction_bench\nstorage: ./storage\nlibraries: [transformations/*.py]\n"
    (out / "deltaflow.yml").write_text(spec + (MAINTENANCE if maintenance else ""))
    pipeline = Pipeline.load(out, spark=spark)
    started = time.monotonic()
    pipeline.run("available_now", stop=threading.Event())
    return pipeline.layout.table("readings"), time.monotonic() - started


def median_seconds(action: Callable[[], object], repeat: int = REPEAT) -> tuple[float, float]:
    """Median and spread (max - min) of ``repeat`` timed calls, after one untimed call."""
    action()
    times = []
    for _ in range(repeat):
        started = time.monotonic()
        action()
        times.append(time.monotonic() - started)
    return statistics.median(times), max(times) - min(times)


def queries(spark: Any, path: str) -> dict[str, tuple[float, float]]:
    def full() -> object:
        return spark.read.format("delta").load(path).agg({"value": "sum"}).collect()

    def selective() -> object:
        one = spark.read.format("delta").load(path).where("sensor_id = 's042'")
        return one.agg({"value": "sum"}).collect()

    return {"full scan": median_seconds(full), "one sensor": median_seconds(selective)}


def file_count(path: str) -> int:
    from deltalake import DeltaTable

    return len(DeltaTable(path).file_uris())


def fmt(cell: tuple[float, float]) -> str:
    return f"{cell[0]:.3f} s (±{cell[1] / 2:.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=500)
    parser.add_argument("--rows", type=int, default=2_000, help="rows per raw commit (micro-batch)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the first a warm-up (at least 2)")
    parser.add_argument("--warmup-batches", type=int, default=50, help="commits the warm-up round reads")
    args = parser.parse_args()
    began = time.monotonic()
    print(f"machine: {machine_line()}")
    tmp = Path(tempfile.mkdtemp(prefix="deltaflow-compaction-"))
    try:
        spark = build_session(extra={"spark.sql.shuffle.partitions": "4",
                                     "spark.sql.warehouse.dir": str(tmp / "wh")})
        spark.sparkContext.setLogLevel("ERROR")
        print(f"versions: {versions_line(spark)}")
        raw, warmup_raw = str(tmp / "raw"), str(tmp / "warmup_raw")
        write_raw(raw, args.batches, args.rows)
        write_raw(warmup_raw, min(args.warmup_batches, args.batches), args.rows)
        print(f"raw: {args.batches} commits of {args.rows:,} readings ({SENSORS} sensors)\n")
        contestants: dict[str, Callable[[str, Path], tuple[str, float]]] = {
            "hand-written": lambda source, out: hand_written(spark, source, out),
            "deltaflow, maintenance off": lambda src, out: deltaflow_job(spark, src, out, maintenance=False),
            "deltaflow, maintenance on": lambda src, out: deltaflow_job(spark, src, out, maintenance=True),
        }
        names = list(contestants)
        rates: dict[str, list[float]] = {name: [] for name in names}
        tables: dict[str, str] = {}
        for round_ in range(args.rounds):
            order = names[round_ % 3:] + names[:round_ % 3]
            for name in order:
                source = raw if round_ else warmup_raw
                tables[name], seconds = contestants[name](source, tmp / f"r{round_}" / name.replace(" ", "_"))
                if round_:
                    rates[name].append(args.batches * args.rows / seconds)
            print(f"round {round_}{' (warm-up)' if not round_ else ''}: {', '.join(order)}")
        hand = statistics.median(rates["hand-written"])
        print("\n| ingest | rows/s, median (spread) | vs hand-written |\n|---|---|---|")
        for name in names:
            median = statistics.median(rates[name])
            print(f"| {name} | {median:,.0f} ({min(rates[name]):,.0f}-{max(rates[name]):,.0f}) | "
                  f"{median / hand:.2f}x |")

        off, on = tables["deltaflow, maintenance off"], tables["deltaflow, maintenance on"]
        layout_rows = [("maintenance off", file_count(off), queries(spark, off))]
        project = Path(off).parents[2]
        pipeline = Pipeline.load(project, spark=spark)
        started = time.monotonic()
        pipeline.optimize(["readings"], zorder=["sensor_id"])
        optimize_seconds = time.monotonic() - started
        layout_rows.append(("after optimize --zorder sensor_id", file_count(off), queries(spark, off)))
        layout_rows.append(("maintenance on from the start", file_count(on), queries(spark, on)))
        print(f"\n| table after {args.batches} batches | files | full scan | one sensor | full scan vs off |"
              "\n|---|---|---|---|---|")
        base = layout_rows[0][2]["full scan"][0]
        for label, files, times in layout_rows:
            print(f"| {label} | {files:,} | {fmt(times['full scan'])} | {fmt(times['one sensor'])} | "
                  f"{times['full scan'][0] / base:.2f}x |")
        print(f"(optimize took {optimize_seconds:.1f} s)")

        from delta.tables import DeltaTable

        table = DeltaTable.forPath(spark, off)
        reads = {
            "history (20 versions)": (lambda: pipeline.history("readings", 20),
                                      lambda: table.history(20).collect()),
            "vacuum --dry-run": (
                lambda: pipeline.vacuum(["readings"], timedelta(days=7), dry_run=True),
                lambda: spark.sql(f"VACUUM delta.`{off}` DRY RUN").collect()),
        }
        answers: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {}
        print("\n| read | deltaflow | Spark | ratio |\n|---|---|---|---|")
        for label, (ours, theirs) in reads.items():
            # Spark's VACUUM DRY RUN takes over a minute here: three timed calls are enough to see it.
            repeat = 3 if "vacuum" in label else REPEAT
            mine, spark_side = median_seconds(ours), median_seconds(theirs, repeat)
            answers[label] = (mine, spark_side)
            print(f"| {label} | {fmt(mine)} | {fmt(spark_side)} | {mine[0] / spark_side[0]:.2f}x |")
        spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    hand_name = "hand-written readStream -> writeStream"
    save("compaction", "Many small micro-batches: ingest with and without automatic maintenance, and the "
         "reads after it", [
             *(Figure(f"ingest rows/s, {name}", "rows/s", rates[name], rates["hand-written"], hand_name,
                      higher_is_better=True) for name in names[1:]),
             Figure("full scan after the batches, maintenance on", "s", [layout_rows[2][2]["full scan"][0]],
                    [layout_rows[0][2]["full scan"][0]], "the same table, maintenance off",
                    higher_is_better=False,
                    note=f"files: {layout_rows[2][1]:,} with maintenance on, {layout_rows[0][1]:,} off"),
             *(Figure(f"`{label}`", "s", [mine[0]], [theirs[0]], "the same answer through Spark",
                      higher_is_better=False) for label, (mine, theirs) in answers.items())],
         notes=[f"{args.batches} micro-batches of {args.rows:,} rows; ingest: medians of {args.rounds - 1} "
                "counted rounds."])
    print(f"\nmedians of {REPEAT} timed calls (Spark's VACUUM: 3) after one untimed; ± half the spread. "
          f"Total {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
