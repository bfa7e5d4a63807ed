"""Named crash points: where a test makes a run die by SIGKILL, to prove nothing is lost or doubled after.

Off unless ``$DELTAFLOW_CRASH_AT`` names a point, as ``<point>`` or ``<point>@<n>`` (the n-th time this
process reaches it; default the first). The process group (Python driver and Spark JVM) is then killed at
once, as a power cut would. Several points, comma-separated, kill it once every one is reached: a thread
that reaches one waits there for the others, so several flows die with a batch in flight (a compaction's
point cannot wait, its job goes on: name it alone). The points:

=================================  ======================================================================
``after_commit:<flow>``            a foreach-batch flow (auto CDC, foreach-batch sink, quarantine split,
                                   materialized view) committed its batch's Delta writes; Spark's
                                   checkpoint has not recorded the batch yet
``refresh_swapped:<dataset>``      a full refresh replaced the table's rows; its record is not cleared yet
``replay_applied:<table>``         a quarantine replay wrote its rows; its record is not cleared yet
``compacting:<table>``             a compaction's Spark job is writing the new files; its commit is not
                                   made (files on disk that no version of the table names)
``vacuumed:<table>``               VACUUM deleted a table's files; the tables after it are not vacuumed
=================================  ======================================================================

An append flow's point is ``after_commit:<flow>`` too (:mod:`deltaflow.sinks.append`); one whose schema
evolves has none: Delta's own streaming sink commits and Spark records the batch with no deltaflow code
between them (the SIGKILL tests at random moments cover it).

Examples:
    >>> crash_point("after_commit:silver")  # nothing happens unless $DELTAFLOW_CRASH_AT names it

"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ENV = "DELTAFLOW_CRASH_AT"
_hits: Counter[str] = Counter()
_reached: set[str] = set()
#: How long a point reached waits for the others it was named with.
WAIT_SECONDS = 300
_lock = threading.Lock()


def crash_point(point: str) -> None:
    """SIGKILL this process group here when ``$DELTAFLOW_CRASH_AT`` names ``point`` (see the module).

    With other points named, this thread waits here until they are reached too (at most
    :data:`WAIT_SECONDS`; then the group dies anyway, the points not reached named on stderr).
    """
    if not _due(point):
        return
    with _lock:
        _reached.add(point)
        waiting = ", ".join(sorted(set(_named()) - _reached))
    if waiting:
        sys.stderr.write(f"deltaflow: crash point {point} reached: waiting for {waiting}\n")
        sys.stderr.flush()
        threading.Event().wait(WAIT_SECONDS)  # the last point reached kills the group, this thread with it
        with _lock:
            waiting = ", ".join(sorted(set(_named()) - _reached))
        sys.stderr.write(f"deltaflow: crash points not reached in {WAIT_SECONDS} s: {waiting}\n")
    _kill(point)


@contextmanager
def crash_while_jobs_run(point: str, spark: SparkSession) -> Iterator[None]:
    """SIGKILL this process group once a Spark job started inside the block has a task running or done.

    For work deltaflow hands to Spark whole (a compaction): the kill lands while its tasks write, before the
    driver commits. Only jobs of this thread's job group count, so the flows running beside it do not.

    Examples:
        >>> with crash_while_jobs_run("compacting:bronze", spark):  # doctest: +SKIP
        ...     DeltaTable.forPath(spark, path).optimize().executeCompaction()

    """
    if not _due(point):
        yield
        return
    context = spark.sparkContext
    tracker, group = context.statusTracker(), context.getLocalProperty("spark.jobGroup.id")
    before, stop = set(tracker.getJobIdsForGroup(group)), threading.Event()

    def watch() -> None:
        while not stop.wait(0.005):
            for job in set(tracker.getJobIdsForGroup(group)) - before:
                info = tracker.getJobInfo(job)
                for stage_id in info.stageIds if info else ():
                    stage = tracker.getStageInfo(stage_id)
                    if stage and stage.numActiveTasks + stage.numCompletedTasks:
                        _kill(point)

    watcher = threading.Thread(target=watch, name=f"crash {point}", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()


def _named() -> dict[str, int]:
    """The points ``$DELTAFLOW_CRASH_AT`` names, each with the time it is due (1: the first)."""
    named = (part.strip().partition("@") for part in os.environ.get(ENV, "").split(","))
    return {name: int(nth or 1) for name, _, nth in named if name}


def _due(point: str) -> bool:
    nth = _named().get(point)
    if nth is None:
        return False
    with _lock:
        _hits[point] += 1
        return _hits[point] == nth


def _kill(point: str) -> None:
    sys.stderr.write(f"deltaflow: crash point {point} reached: SIGKILL\n")
    sys.stderr.flush()
    os.killpg(os.getpgrp(), signal.SIGKILL)
