"""``growth.py --parts log``: a bronze batch over a table whose Delta log holds many more files.

For each log size (``--files-small`` and ``--files-large`` files), each contestant lands a Kafka topic in a
table of its own (``bronze_ingest.py``'s contestants: deltaflow's bronze flow and the seed-004 job), then
the table's log gets one commit adding that many files (``add`` actions of files that do not exist: an
append reads none of them, but every snapshot Delta builds holds them) and a checkpoint Spark writes, as
a table that has grown to that many files would have. Then ``--steps`` batches of ``--log-events``
events each are timed (Spark's ``triggerExecution`` of each contestant's batch, trigger availableNow),
the contestants alternating; every event is then checked in each table exactly once.

Example:
    >>> figure = log_part(spark, tmp, args)  # doctest: +SKIP

"""

from __future__ import annotations

import json
import random
import statistics
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bronze_ingest import TOPIC, free_port, landing_job, write_project
from deltaflow.dev.broker import EmbeddedKafka
from deltaflow.dev.generator import clickstream_event, produce
from deltaflow.dev.topics import create_topic
from deltaflow.pipeline import Pipeline
from results import Figure


def add_files(spark: Any, table: str, files: int) -> None:
    """Commit ``files`` files of one row each to ``table``'s log, then have Spark write a checkpoint."""
    log = Path(table) / "_delta_log"
    version = max(int(p.name.split(".")[0]) for p in log.glob("*.json")) + 1
    now = int(time.time() * 1000)
    stats = json.dumps({"numRecords": 1})
    with (log / f"{version:020d}.json").open("w") as out:
        out.write(json.dumps({"commitInfo": {"timestamp": now, "operation": "WRITE",
                                             "operationParameters": {"mode": "Append"}}}) + "\n")
        for index in range(files):
            out.write(json.dumps({"add": {"path": f"grown-{index:08d}.parquet", "partitionValues": {},
                                          "size": 1_000, "modificationTime": now, "dataChange": True,
                                          "stats": stats}}) + "\n")
    jvm = spark._jvm
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, table)
    delta_log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())  # reads the new commit
    delta_log.checkpoint()


def batch_seconds(progress: list[Any]) -> list[float]:
    return [p.durationMs.get("triggerExecution", 0) / 1000 for p in progress if p.numInputRows]


class Contestants:
    """Both contestants' tables for one log size, each step landing the topic's new events."""

    def __init__(self, spark: Any, root: Path, bootstrap: str, batch: int) -> None:
        self.spark, self.root, self.bootstrap, self.batch = spark, root, bootstrap, batch
        self.project = write_project(root / "deltaflow", bootstrap, batch)
        self.table = {"deltaflow": Pipeline.load(self.project).layout.table("bronze_clicks"),
                      "hand-written": str(root / "hand-written" / "table")}

    def step(self, who: str) -> list[float]:
        """Land what is new in the topic; the time of each batch that read rows."""
        if who == "hand-written":
            return batch_seconds(landing_job(self.spark, self.bootstrap, str(self.root / who), self.batch))
        run = Pipeline.load(self.project, spark=self.spark).start("available_now")
        run.finish(threading.Event())
        return batch_seconds(run.queries["bronze_clicks"].recentProgress)

    def rows(self, who: str) -> tuple[int, int]:
        """(rows, distinct positions) of the events landed: equal when each is there once."""
        from pyspark.sql import functions as F

        df = self.spark.read.parquet(*[str(p) for p in Path(self.table[who]).glob("part-*.parquet")])
        return df.count(), df.select(F.countDistinct("partition", "offset")).first()[0]


def log_part(spark: Any, tmp: Path, args: Any) -> Figure:
    """A bronze batch of ``args.log_events`` events over a log of ``args.files_small`` and then
    ``args.files_large`` files: both contestants, growth from the one to the other."""
    rng = random.Random(args.seed)
    times: dict[str, dict[int, list[float]]] = {"deltaflow": {}, "hand-written": {}}
    produced = 0
    with EmbeddedKafka(state_dir=tmp / "kafka", port=free_port()) as broker:
        bootstrap = broker.status().bootstrap or ""
        create_topic(bootstrap, TOPIC, partitions=3)

        def more() -> None:
            nonlocal produced
            produce(bootstrap, TOPIC, [clickstream_event(rng, datetime.now(UTC))
                                       for _ in range(args.log_events)])
            produced += args.log_events

        for files in (args.files_small // 10, args.files_small, args.files_large):  # the first: warm-up
            more()
            contestants = Contestants(spark, tmp / f"log-{files}", bootstrap, args.log_events)
            for who in times:
                contestants.step(who)  # creates the table and lands the topic so far
                began = time.perf_counter()
                add_files(spark, contestants.table[who], files)
                print(f"  {who}: {files:,} files committed and checkpointed in "
                      f"{time.perf_counter() - began:.0f} s")
            for step in range(args.steps):
                more()
                order = list(times) if step % 2 == 0 else list(reversed(times))
                for who in order:
                    times[who].setdefault(files, []).extend(contestants.step(who))
                print(f"  log of {files:,} files, step {step + 1}: "
                      + ", ".join(f"{w} {times[w][files][-1]:.2f} s" for w in times), flush=True)
            for who in times:
                rows, distinct = contestants.rows(who)
                if rows != produced or distinct != produced:
                    raise SystemExit(f"{who}: {rows:,} rows, {distinct:,} distinct positions, "
                                     f"{produced:,} events produced")
    small, large = args.files_small, args.files_large
    medians = {who: {small: statistics.median(t[small]), large: statistics.median(t[large])}
               for who, t in times.items()}
    print(f"\n| bronze batch | {small:,} files (s) | {large:,} files (s) | growth |\n|---|---:|---:|---:|")
    for who, by_size in medians.items():
        few, many = by_size[small], by_size[large]
        print(f"| {who} | {few:.2f} | {many:.2f} | {many / few:.2f}x |")
    hand = medians["hand-written"]
    return Figure(f"bronze batch of {args.log_events:,} events, log of {large:,} files", "s",
                  times["deltaflow"][large], times["deltaflow"][small],
                  f"deltaflow, the same batch over a log of {small:,} files", higher_is_better=False,
                  target=1 / 1.3, target_text=f"≤ 1.3× the batch over a log {large // small}× smaller",
                  note=f"hand-written (seed 004): {hand[small]:.2f} s over {small:,} files, "
                       f"{hand[large]:.2f} s over {large:,} ({hand[large] / hand[small]:.2f}×)")
