"""How a micro-batch's cost grows with the data already there: the same batch into a larger table.

Issue 39 asks that a batch of the same size cost at most 1.3× as much when what it lands in is ten times
larger (a hundred times for the log: 10k against 1M files). Four parts (``--parts``, default all),
each against its hand-written job in the same session:

* ``cdc``: for each target size (``--small`` and ``--large`` rows) an events table as ``cdc_merge.py``
  writes it (commit 0: the initial state; then ``--batches`` commits of ``--changes`` changed keys each,
  about 1 % deletes and 1 % new keys), and both of ``cdc_merge.py``'s contestants over it, one micro-batch
  per commit: deltaflow's auto CDC flow and the hand-written foreachBatch MERGE, each also into a target
  with deletion vectors (``deltaflow-dv``, ``hand-written-dv``). Batch 0 (the initial load) is not
  counted; the targets are checked equal to each other and to the state the events imply.
* ``scd2``: the same events into an SCD type 2 history (:mod:`growth_scd2`): deltaflow's auto CDC flow
  with ``stored_as_scd_type=2`` against the SCD type 2 MERGE of Delta's documentation, each also with
  deletion vectors on its target; every history checked against the others' and the events' state.
* ``gold``: for each silver size, ``view_state.py``'s contestants (the example's gold as shipped, its
  state bounded by a 10-minute lateness, against the exact job by hand with the same watermark, update
  mode and MERGE, on RocksDB) over a silver table of that many clicks in one hour (one user per row, so
  every (hour, product, user) pair is distinct and the state holds one entry per row: the hour is still
  open, nothing is dropped); each contestant's first batch reads them all and is not counted, then
  ``--steps`` steps of ``--step-rows`` new clicks are.
* ``log``: a bronze batch over a table whose Delta log holds ``--files-small`` and then ``--files-large``
  files (:mod:`growth_log`): deltaflow's bronze flow against the seed-004 job.

A warm-up round on a small table runs first and is discarded; the contestants' order alternates. Figures:
the median counted batch per contestant and size, and the growth from the small size to the large one.

    .venv/bin/python benchmarks/growth.py [--parts cdc,scd2,gold,log] [--small 1000000] [--large 10000000]
                                          [--changes 10000] [--batches 4] [--rounds 2] [--steps 8]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cdc_merge import (
    Result,
    deltaflow_job,
    expected_state,
    fingerprint,
    hand_written,
    write_events,
)
from deltaflow.pipeline import Pipeline
from deltaflow.runtime.session import build_session
from growth_log import log_part
from growth_scd2 import NO_TARGET, scd2_part, warm_up
from results import Figure, machine_line, save, versions_line

DELETION_VECTORS = {"delta.enableDeletionVectors": "true"}


def deltaflow_deletion_vectors(spark: Any, events: str, out: Path, rows: int, batches: int) -> Result:
    """deltaflow's auto CDC flow into a target with deletion vectors: a MERGE marks the rows it replaces."""
    return deltaflow_job(spark, events, out, rows, batches, **DELETION_VECTORS)


def hand_written_deletion_vectors(spark: Any, events: str, out: Path, rows: int, batches: int) -> Result:
    """The hand-written MERGE into a target with deletion vectors."""
    return hand_written(spark, events, out, rows, batches, **DELETION_VECTORS)


#: Each deltaflow contestant against the hand-written job with the same target (the growth figures' notes).
CONTESTANTS = {"hand-written": hand_written, "deltaflow": deltaflow_job,
               "hand-written-dv": hand_written_deletion_vectors, "deltaflow-dv": deltaflow_deletion_vectors}


def run_size(spark: Any, root: Path, rows: int, changes: int, batches: int, rounds: int,
             seed: int) -> dict[str, list[Result]] | None:
    """Both contestants over one target size; ``None`` if a round's targets differ from the events' state."""
    events = str(root / "events")
    began = time.perf_counter()
    write_events(spark, events, rows, batches, 100 * changes / rows, seed)
    print(f"\n{rows:,}-row target: wrote the events in {time.perf_counter() - began:.0f} s")
    expected = fingerprint(expected_state(spark, events))
    runs: dict[str, list[Result]] = {who: [] for who in CONTESTANTS}
    for round_ in range(rounds):
        order = list(CONTESTANTS) if round_ % 2 == 0 else list(reversed(CONTESTANTS))
        for who in order:
            result = CONTESTANTS[who](spark, events, root / f"{who}-{round_}", rows, batches)
            runs[who].append(result)
            print(f"  {who:12s} round {round_ + 1}: batches (s) "
                  + ", ".join(f"{ms / 1000:.2f}" for ms in result.millis)
                  + f"; MERGE alone {statistics.median(result.merge_millis) / 1000:.2f} s")
        outs = {who: root / f"{who}-{round_}" for who in CONTESTANTS}
        targets = [str(out / "accounts") if who.startswith("hand-written")
                   else Pipeline.load(out).layout.table("accounts") for who, out in outs.items()]
        if {fingerprint(spark.read.format("delta").load(path)) for path in targets} != {expected}:
            print(f"  round {round_ + 1}: the targets differ from the state expected from the events")
            return None
        for out in outs.values():
            shutil.rmtree(out, ignore_errors=True)
    return runs


def median_batch(runs: list[Result]) -> list[float]:
    """Each round's median counted batch, in seconds."""
    return [statistics.median(r.millis) / 1000 for r in runs]


def cdc_part(spark: Any, tmp: Path, args: argparse.Namespace) -> list[Figure] | None:
    """The CDC batch into both target sizes; ``None`` if a target was wrong."""
    warm_up(spark, tmp / "cdc-warm-up", CONTESTANTS, args.small // 10, args.seed, "cdc")
    sizes: dict[int, dict[str, list[Result]]] = {}
    for rows in (args.small, args.large):
        runs = run_size(spark, tmp / f"cdc-{rows}", rows, args.changes, args.batches, args.rounds, args.seed)
        if runs is None:
            return None
        sizes[rows] = runs
    medians = {who: {rows: statistics.median(median_batch(sizes[rows][who])) for rows in sizes}
               for who in CONTESTANTS}
    print_growth("auto CDC batch", medians, args)

    def figure(who: str, what: str) -> Figure:
        hand = medians[who.replace("deltaflow", "hand-written")]
        note = (("" if what else "no deletion vectors: ")
                + f"hand-written foreachBatch MERGE {hand[args.small]:.2f} s into {args.small:,} rows, "
                + f"{hand[args.large]:.2f} s into {args.large:,} ({growth(hand, args):.2f}×)")
        return Figure(f"auto CDC batch of {args.changes:,} changes, {args.large:,}-row target"
                      + (f", {what}" if what else ""), "s",
                      median_batch(sizes[args.large][who]), median_batch(sizes[args.small][who]),
                      f"{who}, the same batch into a {args.small:,}-row target", higher_is_better=False,
                      note=NO_TARGET + note)

    return [figure("deltaflow", ""), figure("deltaflow-dv", "deletion vectors on the target")]


def gold_part(spark: Any, tmp: Path, args: argparse.Namespace) -> Figure:
    """Gold's batch over both silver sizes: deltaflow's incremental view, the exact hand-written job."""
    from gold_batches import append_silver
    from view_state import deltaflow_contestant, hand_written_exact

    chunk = 1_000_000  # silver is written a million rows per commit
    times: dict[str, dict[int, list[float]]] = {"hand-written, exact": {}, "deltaflow": {}}
    for rows in (args.small // 10, args.small, args.large):  # the first: the warm-up, discarded
        root = tmp / f"gold-{rows}"
        silver = str(root / "silver")
        began = time.perf_counter()
        for step in range(max(1, rows // chunk)):
            append_silver(spark, silver, step, min(rows, chunk), rows, args.products)
        print(f"\ngold over {rows:,} silver rows: wrote silver in {time.perf_counter() - began:.0f} s")
        jobs = {"hand-written, exact": hand_written_exact(spark, root / "exact", silver),
                "deltaflow": deltaflow_contestant(spark, root / "deltaflow", silver, {})}
        for who, job in jobs.items():
            began = time.perf_counter()
            job()  # every row there so far: the state is built, not counted
            print(f"  {who}: first batch over {rows:,} rows in {time.perf_counter() - began:.0f} s")
        first = rows // args.step_rows + 1  # later steps' ids follow the rows already there
        for step in range(args.steps):
            append_silver(spark, silver, first + step, args.step_rows, rows, args.products)
            order = list(jobs) if step % 2 == 0 else list(reversed(jobs))
            for who in order:
                times[who].setdefault(rows, []).append(jobs[who]()["seconds"])
            print(f"  step {step + 1}: " + ", ".join(f"{w} {times[w][rows][-1]:.2f} s" for w in jobs))
        shutil.rmtree(root, ignore_errors=True)
    medians = {who: {rows: statistics.median(times[who][rows]) for rows in (args.small, args.large)}
               for who in times}
    print_growth("gold batch", medians, args)
    hand = medians["hand-written, exact"]
    return Figure(f"gold batch of {args.step_rows:,} clicks, silver at {args.large:,} rows", "s",
                  times["deltaflow"][args.large], times["deltaflow"][args.small],
                  f"deltaflow, the same batch with silver at {args.small:,} rows", higher_is_better=False,
                  target=1 / 1.3, target_text=f"≤ 1.3× the batch over a silver {args.large // args.small}× "
                  "smaller",
                  note=f"hand-written exact job: {hand[args.small]:.2f} s with silver at {args.small:,} "
                       f"rows, {hand[args.large]:.2f} s at {args.large:,} ({growth(hand, args):.2f}×)")


def growth(by_size: dict[int, float], args: argparse.Namespace) -> float:
    return by_size[args.large] / by_size[args.small]


def print_growth(what: str, medians: dict[str, dict[int, float]], args: argparse.Namespace) -> None:
    print(f"\n| {what} | {args.small:,} rows (s) | {args.large:,} rows (s) | growth |\n|---|---:|---:|---:|")
    for who, by_size in medians.items():
        few, many = by_size[args.small], by_size[args.large]
        print(f"| {who} | {few:.2f} | {many:.2f} | {growth(by_size, args):.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="cdc,scd2,gold,log",
                        help="which of cdc, scd2, gold, log (comma-separated)")
    parser.add_argument("--small", type=int, default=1_000_000, help="rows of the smaller table")
    parser.add_argument("--large", type=int, default=10_000_000, help="rows of the larger table")
    parser.add_argument("--changes", type=int, default=10_000, help="cdc: changed keys per batch")
    parser.add_argument("--batches", type=int, default=4, help="cdc: counted batches per round")
    parser.add_argument("--rounds", type=int, default=2, help="cdc: rounds per size")
    parser.add_argument("--step-rows", type=int, default=40_000, help="gold: new clicks per step")
    parser.add_argument("--steps", type=int, default=8, help="gold, log: counted steps per size")
    parser.add_argument("--products", type=int, default=500, help="gold: products (users: one per row)")
    parser.add_argument("--files-small", type=int, default=10_000, help="log: files in the smaller log")
    parser.add_argument("--files-large", type=int, default=1_000_000, help="log: files in the larger log")
    parser.add_argument("--log-events", type=int, default=10_000, help="log: events per bronze batch")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--shuffle-partitions", type=int, default=4)
    parser.add_argument("--workdir", help="folder for the run's tables (default: a temporary folder)")
    parser.add_argument("--driver-memory", default="8g", help="the session's heap")
    args = parser.parse_args()
    parts = args.parts.split(",")
    began = time.monotonic()
    print(f"machine: {machine_line()}")
    tmp = Path(tempfile.mkdtemp(prefix="deltaflow-growth-", dir=args.workdir))
    figures: dict[str, list[Figure]] = {}
    try:
        spark = build_session(extra={
            "spark.sql.warehouse.dir": str(tmp / "wh"),
            "spark.sql.shuffle.partitions": str(args.shuffle_partitions),
            "spark.sql.streaming.numRecentProgressUpdates": str(max(100, 2 * args.batches + 10)),
            "spark.driver.memory": args.driver_memory,
        })
        spark.sparkContext.setLogLevel("ERROR")
        print(f"versions: {versions_line(spark)}; driver memory {args.driver_memory}")
        if "cdc" in parts:
            cdc = cdc_part(spark, tmp, args)
            if cdc is None:
                sys.exit(1)
            figures["cdc"] = cdc
        if "scd2" in parts:
            scd2 = scd2_part(spark, tmp, args)
            if scd2 is None:
                sys.exit(1)
            figures["scd2"] = scd2
        if "gold" in parts:
            figures["gold"] = [gold_part(spark, tmp, args)]
        if "log" in parts:
            figures["log"] = [log_part(spark, tmp, args)]
        spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\ntotal time {time.monotonic() - began:.0f} s")
    notes = {
        "cdc": f"{args.changes:,} changed keys per batch (about 1 % deletes, 1 % new keys), "
               "deltaflow-dv and hand-written-dv: the same jobs, their targets created with "
               "delta.enableDeletionVectors; "
               f"{args.batches} counted batches per round, medians of {args.rounds} rounds after a warm-up "
               "round; both targets equal to the state expected from the events in every round.",
        "scd2": f"SCD type 2, {args.changes:,} changed keys per batch (about 1 % deletes, 1 % new keys), "
                "with and without deletion vectors on the target; "
                f"{args.batches} counted batches per round, medians of {args.rounds} rounds after a warm-up "
                "round; every target's versions equal to the others', its current versions to the state "
                "expected from the events, in every round.",
        "gold": f"{args.steps} steps of {args.step_rows:,} clicks after each contestant's first batch over "
                f"the silver rows already there, one user per row, {args.products} products, medians; "
                "gold's state in RocksDB for both (deltaflow's settings for deltaflow, Spark's with "
                "changelog checkpointing for the hand-written job).",
        "log": f"{args.steps} batches of {args.log_events:,} events per log size after each contestant's "
               "first run, medians; the files added to the log do not exist (an append reads none); every "
               "event checked in each table once.",
    }
    for part, found in figures.items():  # one results file per part: each can be run alone
        ratio = args.files_large // args.files_small if part == "log" else args.large // args.small
        save(f"growth_{part}", f"A batch's cost as the data grows ({part}): the same batch into a table "
             f"{ratio}× larger", found, notes=[notes[part]])


if __name__ == "__main__":
    main()
