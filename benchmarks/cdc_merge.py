"""Auto-CDC upserts into a Delta table: deltaflow's auto CDC flow vs a hand-written foreachBatch MERGE.

For each cell (a share of the keys changed per batch, 1 % and 20 % by default) the script writes a Delta
"events" table: commit 0 is the initial state (``--rows`` rows, keys 0..rows-1), then ``--batches`` commits
of change events, each for distinct random keys with a sequence above every earlier one, about 1 % of them
deletes, plus about 1 % new keys beyond the range used so far. Every commit is one file, and both
contestants read the table with ``maxFilesPerTrigger=1`` and ``startingVersion=0``, trigger availableNow,
so one commit is one micro-batch; batch 0 (the initial load into the empty target) is not counted.

* hand-written: seeds 001/003's ``foreachBatch`` MERGE as a user would write it for the same semantics:
  the latest event per key by ``seq`` (``row_number``), then ``DeltaTable.merge`` on ``t.id = s.id``
  deleting on ``op = 'DELETE'``, updating when ``s.seq > t.seq``, inserting the rest, with the batch's
  ``txnAppId`` / ``txnVersion`` for idempotency (seed 003);
* deltaflow: a project with a ``@dp.temporary_view`` over the events table and
  ``dp.create_auto_cdc_flow(keys=["id"], sequence_by="seq", apply_as_deletes="op = 'DELETE'",
  except_column_list=["op"])``, run in-process with ``PipelineRun``. It does more per batch than the
  hand-written job: it checks for null keys and sequences, and it keeps tombstones so that a late insert
  cannot bring back a deleted row (the hand-written job would let it).

Both run in one SparkSession, one at a time, each into its own fresh target and checkpoint. Each cell
first runs a warm-up round of its own size, discarded (the JVM settles over a whole round: after a smaller
warm-up, both contestants' first counted round ran about a quarter below their later rounds' rates); then
``--rounds`` rounds, the order alternating (hand-written first in odd rounds, deltaflow first in even
ones). Figures per contestant and cell: source rows per second over the counted batches (their rows over
the sum of their ``triggerExecution`` times), as the median of the rounds with their spread, and the p50 /
p99 of the per-batch duration over all rounds. After every round both targets are compared (row count and
an order-independent checksum) with each other and with the state expected from the events; the script
exits with 1 if they differ.

    .venv/bin/python benchmarks/cdc_merge.py [--rows 1000000] [--batches 8] [--cells 1,20] [--rounds 6]
                                             [--delete-share 1]
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deltaflow.pipeline import Pipeline
from deltaflow.runtime.session import build_session
from results import Figure, machine_line, save, versions_line

SEQ_STEP = 10**12  # seq = batch * SEQ_STEP + id: above every earlier batch's (ids stay below SEQ_STEP)
CITIES = ("Amsterdam", "Berlin", "Lisbon", "Madrid", "Oslo", "Paris", "Prague", "Rome", "Vienna", "Warsaw")
COLUMNS = ("id", "name", "city", "balance", "seq")
DELETE_SHARE, INSERT_SHARE = 0.01, 0.01

DEFINITIONS = '''\
import deltaflow as dp

EVENTS = {events!r}


@dp.temporary_view
def events():
    return (spark.readStream.format("delta").option("maxFilesPerTrigger", 1).option("startingVersion", 0)
            .load(EVENTS))


dp.create_streaming_table("accounts", table_properties={properties!r})
dp.create_auto_cdc_flow(target="accounts", source="events", keys=["id"], sequence_by="seq",
                        apply_as_deletes="op = 'DELETE'", except_column_list=["op"])
'''


@dataclass
class Result:
    """One contestant's run of one cell."""

    rows: list[int] = field(default_factory=list)  # per counted batch
    millis: list[int] = field(default_factory=list)  # triggerExecution per counted batch
    wall: float = 0.0  # seconds from query start to stop, batch 0 and start/stop included
    merge_millis: list[float] = field(default_factory=list)  # Delta's MERGE executionTimeMs, target

    rates: list[float] = field(default_factory=list)  # per round, when pooled

    @property
    def rate(self) -> float:
        """The median of the rounds' rates when pooled, else this run's."""
        return statistics.median(self.rates) if self.rates else sum(self.rows) / (sum(self.millis) / 1000)

    @property
    def spread(self) -> str:
        return f"{min(self.rates):,.0f}-{max(self.rates):,.0f}" if self.rates else ""

    @staticmethod
    def pooled(runs: list[Result]) -> Result:
        """The rounds of one contestant in one cell, taken together."""
        return Result(rows=[n for r in runs for n in r.rows], millis=[m for r in runs for m in r.millis],
                      wall=statistics.median(r.wall for r in runs),
                      merge_millis=[m for r in runs for m in r.merge_millis], rates=[r.rate for r in runs])

    @property
    def p50(self) -> float:
        return statistics.median(self.millis) / 1000

    @property
    def p99(self) -> float:
        """Nearest rank: with fewer than 100 batches, the slowest batch."""
        ordered = sorted(self.millis)
        return ordered[math.ceil(0.99 * len(ordered)) - 1] / 1000


# -- events -----------------------------------------------------------------------------------------------


def _values(batch: int, seed: int) -> list[Any]:
    """The value columns and ``seq`` of batch ``batch``'s events for the keys in column ``id``."""
    from pyspark.sql import functions as F

    def noise(salt: str) -> Any:
        return F.xxhash64(F.col("id"), F.lit(seed), F.lit(batch), F.lit(salt))

    cities = F.array(*[F.lit(c) for c in CITIES])
    return [
        F.col("id"),
        F.concat(F.lit("customer_"), F.col("id").cast("string"), F.lit(f"_v{batch}")).alias("name"),
        F.element_at(cities, (F.pmod(noise("city"), F.lit(len(CITIES))) + 1).cast("int")).alias("city"),
        F.round(F.pmod(noise("balance"), F.lit(10_000_000)) / 100, 2).alias("balance"),
        (F.lit(batch) * F.lit(SEQ_STEP) + F.col("id")).alias("seq"),
    ]


def write_events(spark: Any, path: str, rows: int, batches: int, percent: float, seed: int,
                 deletes: float = DELETE_SHARE) -> None:
    """Commit 0: the initial state; commits 1..batches: change events for ``percent`` % of the keys each."""
    from pyspark.sql import functions as F

    def commit(df: Any) -> None:
        df.coalesce(1).write.format("delta").mode("append").save(path)

    commit(spark.range(rows).select(*_values(0, seed), F.lit("UPSERT").alias("op")))
    upper = rows  # keys 0..upper-1 have been inserted so far
    for batch in range(1, batches + 1):
        def noise(salt: str, b: int = batch) -> Any:
            return F.xxhash64(F.col("id"), F.lit(seed), F.lit(b), F.lit(salt))

        picked = spark.range(upper).where(F.pmod(noise("pick"), F.lit(10_000)) < round(percent * 100))
        op = F.when(F.pmod(noise("delete"), F.lit(10_000)) < round(deletes * 10_000),
                    F.lit("DELETE")).otherwise(F.lit("UPSERT"))
        new = max(1, round(upper * percent / 100 * INSERT_SHARE))
        changes = (picked.select(*_values(batch, seed), op.alias("op"))
                   .unionByName(spark.range(upper, upper + new).select(*_values(batch, seed),
                                                                       F.lit("UPSERT").alias("op"))))
        commit(changes)
        upper += new


def describe_events(spark: Any, path: str) -> str:
    from pyspark.sql import functions as F

    stats = (spark.read.format("delta").load(path)
             .groupBy(F.floor(F.col("seq") / SEQ_STEP).alias("batch"))
             .agg(F.count(F.lit(1)).alias("rows"), F.sum((F.col("op") == "DELETE").cast("long")).alias("del"))
             .where("batch > 0").orderBy("batch").collect())
    rows = [r["rows"] for r in stats]
    deletes = [r["del"] for r in stats]
    return (f"{len(stats)} change batches of {min(rows):,}..{max(rows):,} rows "
            f"({sum(deletes) / sum(rows):.1%} deletes, ~{INSERT_SHARE:.0%} new keys)")


# -- contestants ------------------------------------------------------------------------------------------


def counted(progress: list[Any], rows: int, batches: int, who: str) -> Result:
    """The counted batches of a query's progress; checks that each commit was exactly one micro-batch."""
    seen = sorted((p.batchId, p.numInputRows, int(p.durationMs.get("triggerExecution", 0)))
                  for p in progress if p.numInputRows > 0)
    if len(seen) != batches + 1 or seen[0][1] != rows:
        raise RuntimeError(f"{who}: expected {batches + 1} micro-batches, the first of {rows:,} rows; got "
                           f"{[(b, n) for b, n, _ in seen]}")
    return Result(rows=[n for _, n, _ in seen[1:]], millis=[ms for _, _, ms in seen[1:]])


def merge_times(spark: Any, path: str) -> list[float]:
    """Delta's ``executionTimeMs`` of each MERGE into ``path``, oldest first."""
    from delta.tables import DeltaTable

    history = DeltaTable.forPath(spark, path).history().where("operation = 'MERGE'").orderBy("version")
    return [float(r["operationMetrics"].get("executionTimeMs", "nan")) for r in history.collect()]


def hand_written(spark: Any, events: str, out: Path, rows: int, batches: int, **properties: str) -> Result:
    """Seeds 001/003's streaming MERGE, written for the same semantics as deltaflow's auto CDC.

    ``properties``: the target's table properties (``growth.py`` turns deletion vectors on with them).
    """
    from delta.tables import DeltaTable
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    target = str(out / "accounts")
    source = spark.read.format("delta").load(events)
    create = DeltaTable.createIfNotExists(spark).location(target).addColumns(source.drop("op").schema)
    for key, value in properties.items():
        create = create.property(key, value)
    create.execute()
    app_id = f"cdc-bench-hand-written-{out.name}"
    columns = {c: f"s.{c}" for c in COLUMNS}

    def upsert(batch: Any, batch_id: int) -> None:
        latest = Window.partitionBy("id").orderBy(F.col("seq").desc())
        changes = batch.withColumn("_rn", F.row_number().over(latest)).where("_rn = 1").drop("_rn")
        session = batch.sparkSession
        session.conf.set("spark.databricks.delta.write.txnAppId", app_id)
        session.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        try:
            (DeltaTable.forPath(session, target).alias("t")
             .merge(changes.alias("s"), "t.id = s.id")
             .whenMatchedDelete(condition="s.op = 'DELETE'")
             .whenMatchedUpdate(condition="s.op <> 'DELETE' AND s.seq > t.seq", set=columns)
             .whenNotMatchedInsert(condition="s.op <> 'DELETE'", values=columns)
             .execute())
        finally:
            session.conf.unset("spark.databricks.delta.write.txnAppId")
            session.conf.unset("spark.databricks.delta.write.txnVersion")

    start = time.perf_counter()
    stream = (spark.readStream.format("delta").option("maxFilesPerTrigger", 1).option("startingVersion", 0)
              .load(events))
    query = (stream.writeStream.queryName(f"hand_written_{out.name}").foreachBatch(upsert)
             .option("checkpointLocation", str(out / "_checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination()
    wall = time.perf_counter() - start
    result = counted(query.recentProgress, rows, batches, "hand-written")
    result.wall = wall
    result.merge_millis = merge_times(spark, target)[1:]
    return result


def deltaflow_job(spark: Any, events: str, out: Path, rows: int, batches: int, **properties: str) -> Result:
    """The same upserts as a deltaflow auto CDC flow, run in-process, its target with ``properties``."""
    (out / "transformations").mkdir(parents=True)
    (out / "transformations" / "defs.py").write_text(DEFINITIONS.format(events=events, properties=properties))
    (out / "deltaflow.yml").write_text(
        "name: cdc_bench\nstorage: ./storage\nlibraries: [transformations/*.py]\n")
    start = time.perf_counter()
    pipeline = Pipeline.load(out, spark=spark)
    run = pipeline.start("available_now")
    run.finish(threading.Event())
    wall = time.perf_counter() - start
    result = counted(run.queries["accounts"].recentProgress, rows, batches, "deltaflow")
    result.wall = wall
    result.merge_millis = merge_times(spark, pipeline.layout.table("accounts"))[1:]
    return result


# -- checks -----------------------------------------------------------------------------------------------


def fingerprint(df: Any) -> tuple[int, int]:
    """Row count and the sum of a 64-bit hash of each row: equal for equal multisets of rows."""
    from pyspark.sql import functions as F

    row = df.select(F.count(F.lit(1)).alias("n"),
                    F.sum(F.xxhash64(*COLUMNS).cast("decimal(38,0)")).alias("h")).first()
    return int(row["n"]), int(row["h"] or 0)


def expected_state(spark: Any, events: str) -> Any:
    """The latest event per key, unless it is a delete."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    latest = Window.partitionBy("id").orderBy(F.col("seq").desc())
    return (spark.read.format("delta").load(events).withColumn("_rn", F.row_number().over(latest))
            .where("_rn = 1 AND op <> 'DELETE'").select(*COLUMNS))


# -- report -----------------------------------------------------------------------------------------------


def print_batches(who: str, result: Result) -> None:
    per_batch = ", ".join(f"{ms / 1000:.2f}" for ms in result.millis)
    print(f"  {who:22s} {result.rate:>10,.0f} rows/s; batches (s): {per_batch}; "
          f"wall {result.wall:.1f} s incl. batch 0 and query start/stop")


def print_table(cells: list[tuple[float, Result, Result]], batches: int) -> None:
    print("\n| cell | deltaflow rows/s | hand-written rows/s | ratio | deltaflow p50/p99 (s) "
          "| hand-written p50/p99 (s) | ratio p50/p99 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for percent, ours, hand in cells:
        print(f"| {percent:g} % of keys/batch ({statistics.median(hand.rows):,.0f} rows) "
              f"| {ours.rate:,.0f} ({ours.spread}) | {hand.rate:,.0f} ({hand.spread}) "
              f"| {ours.rate / hand.rate:.2f}x "
              f"| {ours.p50:.2f} / {ours.p99:.2f} | {hand.p50:.2f} / {hand.p99:.2f} "
              f"| {ours.p50 / hand.p50:.2f}x / {ours.p99 / hand.p99:.2f}x |")
    print(f"\nratio = deltaflow / hand-written (throughput: above 1 is deltaflow faster; durations: above 1 "
          f"is deltaflow slower). rows/s: median of the rounds (spread); p50/p99 over the {batches} counted "
          f"batches of every round (nearest rank{'' if batches >= 100 else ', i.e. the slowest batch'}). "
          "The order alternated round by round, after a discarded warm-up round.")
    print("\nDelta MERGE executionTimeMs per counted batch, median (the rest of a batch is planning, the "
          "dedupe, checks and commits; deltaflow also appends the batch's deletes to its tombstones):")
    for percent, ours, hand in cells:
        hand_merge, our_merge = (statistics.median(r.merge_millis) / 1000 for r in (hand, ours))
        print(f"  {percent:g} %: hand-written target MERGE {hand_merge:.2f} s; "
              f"deltaflow target MERGE {our_merge:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the initial state")
    parser.add_argument("--batches", type=int, default=8, help="counted change batches per cell")
    parser.add_argument("--cells", default="1,20", help="percent of the keys changed per batch, per cell")
    parser.add_argument("--workdir", help="folder for the run's tables (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder at the end")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--rounds", type=int, default=6, help="counted rounds per cell (after the warm-up)")
    parser.add_argument("--shuffle-partitions", type=int, default=4)
    parser.add_argument("--delete-share", type=float, default=DELETE_SHARE * 100,
                        help="percent of each batch's changed keys that are deletes")
    args = parser.parse_args()
    percents = [float(p) for p in args.cells.split(",")]
    deletes = args.delete_share / 100
    began = time.monotonic()

    print(f"machine: {machine_line()}")
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="deltaflow-cdc-", dir=args.workdir))
    identical = True
    try:
        spark = build_session(extra={
            "spark.sql.warehouse.dir": str(tmp / "wh"),
            "spark.sql.shuffle.partitions": str(args.shuffle_partitions),
            "spark.sql.streaming.numRecentProgressUpdates": str(max(100, 2 * args.batches + 10)),
        })
        spark.sparkContext.setLogLevel("ERROR")
        print(f"versions: {versions_line(spark)}")
        print(f"spark: {spark.conf.get('spark.master')}, shuffle partitions "
              f"{spark.conf.get('spark.sql.shuffle.partitions')}, driver memory "
              f"{spark.conf.get('spark.driver.memory')}; one session for both contestants, one at a time")
        print(f"rows={args.rows:,}, batches={args.batches}, cells={args.cells} %, seed={args.seed}, "
              f"workdir={tmp}")
        contestants = {"hand-written": hand_written, "deltaflow": deltaflow_job}
        cells: list[tuple[float, Result, Result]] = []
        for percent in percents:
            cell = tmp / f"cell-{percent:g}"
            events = str(cell / "events")
            t0 = time.perf_counter()
            write_events(spark, events, args.rows, args.batches, percent, args.seed, deletes)
            print(f"\ncell {percent:g} %: wrote the events in {time.perf_counter() - t0:.1f} s: initial "
                  f"state of {args.rows:,} rows (batch 0, not counted), {describe_events(spark, events)}")
            expected = fingerprint(expected_state(spark, events))
            for who, job in contestants.items():
                job(spark, events, cell / f"{who}-warm-up", args.rows, args.batches)
            print("  warm-up round (both contestants, this cell's size): discarded")
            runs: dict[str, list[Result]] = {who: [] for who in contestants}
            for round_ in range(args.rounds):
                order = list(contestants) if round_ % 2 == 0 else list(reversed(contestants))
                for who in order:
                    out = cell / f"{who}-{round_}"
                    result = contestants[who](spark, events, out, args.rows, args.batches)
                    print_batches(f"{who} (round {round_ + 1})", result)
                    runs[who].append(result)
                got_hand = fingerprint(spark.read.format("delta").load(
                    str(cell / f"hand-written-{round_}" / "accounts")))
                got_ours = fingerprint(spark.read.format("delta").load(
                    Pipeline.load(cell / f"deltaflow-{round_}").layout.table("accounts")))
                same = got_hand == got_ours
                correct = got_hand == expected and got_ours == expected
                identical = identical and same and correct
                print(f"  round {round_ + 1}: targets identical: {'yes' if same else 'no'} ({got_ours[0]:,} "
                      f"rows, checksum {got_ours[1] % 2**64:016x} vs {got_hand[1] % 2**64:016x}); equal to "
                      f"the state expected from the events: {'yes' if correct else 'no'}")
            cells.append((percent, Result.pooled(runs["deltaflow"]), Result.pooled(runs["hand-written"])))
        spark.stop()
    finally:
        if args.keep:
            print(f"\nkept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    print_table(cells, args.batches)
    print(f"\ntargets identical in every cell: {'yes' if identical else 'no'}; total time "
          f"{time.monotonic() - began:.0f} s")
    sys.stdout.flush()
    if not identical:
        sys.exit(1)
    save("cdc_merge", "Auto CDC upserts into 1M rows: deltaflow vs seed 001's foreachBatch MERGE", [
        Figure(f"MERGE throughput, {percent:g} % of keys per batch", "rows/s", ours.rates, hand.rates,
               "hand-written foreachBatch MERGE", higher_is_better=True, target=1.0,
               target_text="≥ 1.0× the hand-written foreachBatch MERGE (issue 39), same semantics checked",
               note=f"MERGE alone, median: deltaflow {statistics.median(ours.merge_millis) / 1000:.2f} s, "
                    f"hand-written {statistics.median(hand.merge_millis) / 1000:.2f} s per batch")
        for percent, ours, hand in cells],
        notes=[f"{args.rows:,} rows, {args.batches} counted batches per round ({args.delete_share:g} % of "
               f"each batch's changed keys deleted), medians of {args.rounds} rounds after a discarded "
               "warm-up round of the cell's size; "
               "the targets were identical to each other and to the state expected from the events in every "
               "round. deltaflow also checks keys and sequences and keeps tombstones (a late insert cannot "
               "bring back a deleted row)."])


if __name__ == "__main__":
    main()
