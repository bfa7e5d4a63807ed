"""``growth.py --parts scd2``: an SCD type 2 batch into a history 10× larger.

The events are ``cdc_merge.py``'s (commit 0: ``--small`` or ``--large`` keys; then ``--batches`` commits
of ``--changes`` changed keys, about 1 % deletes and 1 % new keys), read one commit per micro-batch.
Contestants, each into a fresh target, also with deletion vectors on it (``-dv``):

* deltaflow: the same project as ``cdc_merge.py``'s with ``stored_as_scd_type=2``;
* hand-written: the SCD type 2 ``foreachBatch`` MERGE as the Delta documentation stages it (each change
  once with its key to close the current version, and once more with a null key to insert the new one
  when the key has a current version), with the batch's ``txnAppId`` / ``txnVersion``.

Batch 0 (the initial load) is not counted. After each round every target is compared, all versions with
their ``__START_AT`` / ``__END_AT``, with the others, and its current versions with the state the events
imply.

Example:
    >>> figures = scd2_part(spark, tmp, args)  # doctest: +SKIP

"""

from __future__ import annotations

import argparse
import shutil
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from cdc_merge import COLUMNS, DEFINITIONS, Result, counted, expected_state, fingerprint, write_events
from deltaflow.pipeline import Pipeline
from results import Figure

#: The upsert growth figures have no target (issue 74): what each contestant does today instead.
NO_TARGET = ("no target (issue 74): an upsert cost flat in the target's size needs an index from key to "
             "row (Hudi's record-level index); today deltaflow's auto CDC and the hand-written MERGE both "
             "join the batch with the target's files, pruned only by their key statistics; ")

START_AT, END_AT = "__START_AT", "__END_AT"
DELETION_VECTORS = {"delta.enableDeletionVectors": "true"}


def deltaflow_scd2(spark: Any, events: str, out: Path, rows: int, batches: int, **properties: str) -> Result:
    """deltaflow's auto CDC flow, SCD type 2, run in-process."""
    (out / "transformations").mkdir(parents=True)
    definitions = DEFINITIONS.format(events=events, properties=properties).replace(
        'except_column_list=["op"])', 'except_column_list=["op"], stored_as_scd_type=2)')
    (out / "transformations" / "defs.py").write_text(definitions)
    (out / "deltaflow.yml").write_text(
        "name: scd2_bench\nstorage: ./storage\nlibraries: [transformations/*.py]\n")
    pipeline = Pipeline.load(out, spark=spark)
    run = pipeline.start("available_now")
    run.finish(threading.Event())
    return counted(run.queries["accounts"].recentProgress, rows, batches, "deltaflow")


def hand_written_scd2(spark: Any, events: str, out: Path, rows: int, batches: int,
                      **properties: str) -> Result:
    """The documented SCD type 2 MERGE: close the current version, insert the new one."""
    from delta.tables import DeltaTable
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField

    target = str(out / "accounts")
    schema = spark.read.format("delta").load(events).drop("op").schema
    create = (DeltaTable.createIfNotExists(spark).location(target).addColumns(schema)
              .addColumns([StructField(START_AT, LongType()), StructField(END_AT, LongType())]))
    for key, value in properties.items():
        create = create.property(key, value)
    create.execute()
    app_id = f"scd2-bench-hand-written-{out.name}"
    inserted = {**{c: f"s.{c}" for c in COLUMNS}, START_AT: "s.seq", END_AT: "null"}

    def upsert(batch: Any, batch_id: int) -> None:
        latest = Window.partitionBy("id").orderBy(F.col("seq").desc())
        changes = batch.withColumn("_rn", F.row_number().over(latest)).where("_rn = 1").drop("_rn")
        changes = changes.persist()  # staged twice: read the batch once
        session = batch.sparkSession
        current = DeltaTable.forPath(session, target).toDF().where(F.col(END_AT).isNull()).select("id")
        reopened = changes.where("op <> 'DELETE'").join(current, "id", "left_semi")
        staged = (changes.withColumn("_key", F.col("id"))
                  .unionByName(reopened.withColumn("_key", F.lit(None).cast("long"))))
        session.conf.set("spark.databricks.delta.write.txnAppId", app_id)
        session.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        try:
            (DeltaTable.forPath(session, target).alias("t")
             .merge(staged.alias("s"), f"t.id = s._key AND t.{END_AT} IS NULL")
             .whenMatchedUpdate(condition=f"s.seq > t.{START_AT}", set={END_AT: "s.seq"})
             .whenNotMatchedInsert(condition="s.op <> 'DELETE'", values=inserted)
             .execute())
        finally:
            session.conf.unset("spark.databricks.delta.write.txnAppId")
            session.conf.unset("spark.databricks.delta.write.txnVersion")
            changes.unpersist()

    stream = (spark.readStream.format("delta").option("maxFilesPerTrigger", 1).option("startingVersion", 0)
              .load(events))
    query = (stream.writeStream.queryName(f"scd2_hand_written_{out.name}").foreachBatch(upsert)
             .option("checkpointLocation", str(out / "_checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination()
    return counted(query.recentProgress, rows, batches, "hand-written")


CONTESTANTS = {
    "hand-written": hand_written_scd2,
    "deltaflow": deltaflow_scd2,
    "hand-written-dv": lambda *a: hand_written_scd2(*a, **DELETION_VECTORS),
    "deltaflow-dv": lambda *a: deltaflow_scd2(*a, **DELETION_VECTORS),
}


def history_print(df: Any) -> tuple[int, int]:
    """Row count and hash sum over every version, its bounds included."""
    from pyspark.sql import functions as F

    row = df.select(F.count(F.lit(1)).alias("n"),
                    F.sum(F.xxhash64(*COLUMNS, START_AT, END_AT).cast("decimal(38,0)")).alias("h")).first()
    return int(row["n"]), int(row["h"] or 0)


def _target(who: str, out: Path) -> str:
    if who.startswith("hand-written"):
        return str(out / "accounts")
    return Pipeline.load(out).layout.table("accounts")


def run_size(spark: Any, root: Path, rows: int, args: argparse.Namespace) -> dict[str, list[float]] | None:
    """Each round's median counted batch per contestant; ``None`` if a round's targets are wrong."""
    events = str(root / "events")
    write_events(spark, events, rows, args.batches, 100 * args.changes / rows, args.seed)
    expected = fingerprint(expected_state(spark, events))
    medians: dict[str, list[float]] = {who: [] for who in CONTESTANTS}
    for round_ in range(args.rounds):
        order = list(CONTESTANTS) if round_ % 2 == 0 else list(reversed(CONTESTANTS))
        for who in order:
            began = time.perf_counter()
            result = CONTESTANTS[who](spark, events, root / f"{who}-{round_}", rows, args.batches)
            medians[who].append(statistics.median(result.millis) / 1000)
            print(f"  {who:16s} round {round_ + 1}: batches (s) "
                  + ", ".join(f"{ms / 1000:.2f}" for ms in result.millis)
                  + f"; {time.perf_counter() - began:.0f} s with the initial load")
        tables = {who: spark.read.format("delta").load(_target(who, root / f"{who}-{round_}"))
                  for who in CONTESTANTS}
        histories = {history_print(t) for t in tables.values()}
        currents = {fingerprint(t.where(f"{END_AT} IS NULL")) for t in tables.values()}
        if len(histories) != 1 or currents != {expected}:
            print(f"  round {round_ + 1}: the histories differ ({len(histories)} kinds), or their current "
                  "versions differ from the state expected from the events")
            return None
        for who in CONTESTANTS:
            shutil.rmtree(root / f"{who}-{round_}", ignore_errors=True)
    return medians


def warm_up(spark: Any, root: Path, contestants: dict[str, Any], rows: int, seed: int, part: str) -> None:
    """One discarded round of every contestant over ``rows`` keys and 2 batches (``growth.py``'s parts)."""
    write_events(spark, str(root / "events"), rows, 2, 1.0, seed)
    for who, job in contestants.items():
        job(spark, str(root / "events"), root / who, rows, 2)
    print(f"{part} warm-up round ({rows:,} rows, every contestant): discarded")


def scd2_part(spark: Any, tmp: Path, args: argparse.Namespace) -> list[Figure] | None:
    """The SCD type 2 batch into both history sizes; ``None`` if a target was wrong."""
    warm_up(spark, tmp / "scd2-warm-up", CONTESTANTS, args.small // 10, args.seed, "scd2")
    sizes: dict[int, dict[str, list[float]]] = {}
    for rows in (args.small, args.large):
        print(f"\nSCD type 2, {rows:,}-row history:")
        found = run_size(spark, tmp / f"scd2-{rows}", rows, args)
        if found is None:
            return None
        sizes[rows] = found
    print(f"\n| SCD type 2 batch | {args.small:,} rows (s) | {args.large:,} rows (s) | growth |\n"
          "|---|---:|---:|---:|")
    for who in CONTESTANTS:
        few, many = (statistics.median(sizes[r][who]) for r in (args.small, args.large))
        print(f"| {who} | {few:.2f} | {many:.2f} | {many / few:.2f}x |")

    def figure(who: str, what: str) -> Figure:
        hand = {r: statistics.median(sizes[r][who.replace("deltaflow", "hand-written")]) for r in sizes}
        note = (("" if what else "no deletion vectors: ") + f"hand-written SCD type 2 MERGE "
                f"{hand[args.small]:.2f} s into {args.small:,} rows, {hand[args.large]:.2f} s into "
                f"{args.large:,} ({hand[args.large] / hand[args.small]:.2f}×)")
        return Figure(f"auto CDC SCD type 2 batch of {args.changes:,} changes, {args.large:,}-row history"
                      + (f", {what}" if what else ""), "s", sizes[args.large][who], sizes[args.small][who],
                      f"{who}, the same batch into a {args.small:,}-row history", higher_is_better=False,
                      note=NO_TARGET + note)

    def against_hand(who: str, rows: int, what: str) -> Figure:
        return Figure(f"auto CDC SCD type 2 batch of {args.changes:,} changes, {rows:,}-row history"
                      + (f", {what}" if what else ""), "s", sizes[rows][who],
                      sizes[rows][who.replace("deltaflow", "hand-written")],
                      "hand-written SCD type 2 MERGE (Delta's documented staging)", higher_is_better=False)

    dv = "deletion vectors on the target"
    return [figure("deltaflow", ""), figure("deltaflow-dv", dv),
            *(against_hand(who, rows, what) for who, what in (("deltaflow", ""), ("deltaflow-dv", dv))
              for rows in (args.small, args.large))]
