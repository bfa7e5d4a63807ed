"""How a micro-batch's cost grows with the data already there: an auto CDC batch into a 1M vs a 10M-row target.

Issue 39 asks that a batch of the same size cost at most 1.3× as much when the table it lands in is ten
times larger. For each target size (``--small`` and ``--large`` rows) the script writes an events table
as ``cdc_merge.py`` does (commit 0: the initial state; then ``--batches`` commits of ``--changes``
changed keys each, about 1 % deletes and 1 % new keys), and runs both of ``cdc_merge.py``'s contestants
over it, one micro-batch per commit: deltaflow's auto CDC flow and the hand-written foreachBatch MERGE.
Batch 0 (the initial load) is not counted. A warm-up round on a small table runs first and is discarded;
then ``--rounds`` rounds, the order of the contestants alternating. Figures: the median counted batch per
contestant and size, and the growth from the small target to the large one; the targets are checked equal
to each other and to the state expected from the events after every round.

    .venv/bin/python benchmarks/growth.py [--small 1000000] [--large 10000000] [--changes 10000]
                                          [--batches 4] [--rounds 2]
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
from results import Figure, machine_line, save, versions_line

CONTESTANTS = {"hand-written": hand_written, "deltaflow": deltaflow_job}


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
        got = {fingerprint(spark.read.format("delta").load(str(root / f"hand-written-{round_}" / "accounts"))),
               fingerprint(spark.read.format("delta").load(
                   Pipeline.load(root / f"deltaflow-{round_}").layout.table("accounts")))}
        if got != {expected}:
            print(f"  round {round_ + 1}: the targets differ from the state expected from the events")
            return None
        shutil.rmtree(root / f"hand-written-{round_}", ignore_errors=True)
        shutil.rmtree(root / f"deltaflow-{round_}", ignore_errors=True)
    return runs


def median_batch(runs: list[Result]) -> list[float]:
    """Each round's median counted batch, in seconds."""
    return [statistics.median(r.millis) / 1000 for r in runs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=1_000_000, help="rows of the smaller target")
    parser.add_argument("--large", type=int, default=10_000_000, help="rows of the larger target")
    parser.add_argument("--changes", type=int, default=10_000, help="changed keys per batch, both sizes")
    parser.add_argument("--batches", type=int, default=4, help="counted batches per round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--shuffle-partitions", type=int, default=4)
    parser.add_argument("--workdir", help="folder for the run's tables (default: a temporary folder)")
    args = parser.parse_args()
    began = time.monotonic()
    print(f"machine: {machine_line()}")
    tmp = Path(tempfile.mkdtemp(prefix="deltaflow-growth-", dir=args.workdir))
    sizes: dict[int, dict[str, list[Result]]] = {}
    try:
        spark = build_session(extra={
            "spark.sql.warehouse.dir": str(tmp / "wh"),
            "spark.sql.shuffle.partitions": str(args.shuffle_partitions),
            "spark.sql.streaming.numRecentProgressUpdates": str(max(100, 2 * args.batches + 10)),
        })
        spark.sparkContext.setLogLevel("ERROR")
        print(f"versions: {versions_line(spark)}")
        warm = tmp / "warm-up"
        write_events(spark, str(warm / "events"), args.small // 10, 2, 1.0, args.seed)
        for who, job in CONTESTANTS.items():
            job(spark, str(warm / "events"), warm / who, args.small // 10, 2)
        print(f"warm-up round ({args.small // 10:,} rows, both contestants): discarded")
        for rows in (args.small, args.large):
            runs = run_size(spark, tmp / f"rows-{rows}", rows, args.changes, args.batches, args.rounds,
                            args.seed)
            if runs is None:
                sys.exit(1)
            sizes[rows] = runs
        spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    small, large = sizes[args.small], sizes[args.large]
    print(f"\n| contestant | batch, {args.small:,}-row target (s) | batch, {args.large:,}-row target (s) "
          "| growth |\n|---|---:|---:|---:|")
    for who in CONTESTANTS:
        few, many = statistics.median(median_batch(small[who])), statistics.median(median_batch(large[who]))
        print(f"| {who} | {few:.2f} | {many:.2f} | {many / few:.2f}x |")
    print(f"\nmedian counted batch of each round ({args.changes:,} changed keys), median of {args.rounds} "
          f"rounds after a warm-up; total time {time.monotonic() - began:.0f} s")
    ratio = f"{args.large // args.small}×"
    save("growth", "A batch's cost as the table grows: the same auto CDC batch into a 1M vs a 10M-row target", [
        Figure(f"auto CDC batch of {args.changes:,} changes, {args.large:,}-row target", "s",
               median_batch(large["deltaflow"]), median_batch(small["deltaflow"]),
               f"deltaflow, the same batch into a {args.small:,}-row target", higher_is_better=False,
               target=1 / 1.3, target_text=f"≤ 1.3× the batch into a target {ratio} smaller",
               note=f"hand-written foreachBatch MERGE: {statistics.median(median_batch(small['hand-written'])):.2f}"
                    f" s into {args.small:,} rows, "
                    f"{statistics.median(median_batch(large['hand-written'])):.2f} s into {args.large:,}"),
    ], notes=[f"{args.changes:,} changed keys per batch (about 1 % deletes, 1 % new keys), {args.batches} "
              f"counted batches per round, medians of {args.rounds} rounds after a warm-up round; both "
              "targets were equal to the state expected from the events in every round. Not yet measured "
              "here: a gold batch with silver at 1M vs 10M rows, a bronze batch with 10k vs 1M files' "
              "worth of log."])


if __name__ == "__main__":
    main()
