"""Named crash points: where a test makes a run die by SIGKILL, to prove nothing is lost or doubled after.

Off unless ``$DELTAFLOW_CRASH_AT`` names a point, as ``<point>`` or ``<point>@<n>`` (the n-th time this
process reaches it; default the first). The process group (Python driver and Spark JVM) is then killed at
once, as a power cut would. The points:

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

Example:
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
_lock = threading.Lock()


def crash_point(point: str) -> None:
    """SIGKILL this process group here when ``$DELTAFLOW_CRASH_AT`` names ``point`` (see the module)."""
    if _due(point):
        _kill(point)


@contextmanager
def crash_while_jobs_run(point: str, spark: SparkSession) -> Iterator[None]:
    """SIGKILL this process group once a Spark job started inside the block has a task running or done.

    For work deltaflow hands to Spark whole (a compaction): the kill lands while its tasks write, before the
    driver commits. Only jobs of this thread's job group count, so the flows running beside it do not.

    Example:
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


def _due(point: str) -> bool:
    wanted = os.environ.get(ENV)
    if not wanted:
        return False
    name, _, nth = wanted.partition("@")
    if name != point:
        return False
    with _lock:
        _hits[point] += 1
        return _hits[point] == int(nth or 1)


def _kill(point: str) -> None:
    sys.stderr.write(f"deltaflow: crash point {point} reached: SIGKILL\n")
    sys.stderr.flush()
    os.killpg(os.getpgrp(), signal.SIGKILL)
