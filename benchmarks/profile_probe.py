"""The instruments of ``profile_pipeline.py``: micro-batches, Spark jobs and stages, CPU, Delta commits.

* Micro-batches: each stage query's ``recentProgress`` (``spark.sql.streaming.numRecentProgressUpdates``
  raised so that none is dropped). A progress with an ``addBatch`` duration is a batch that ran, with or
  without rows; an idle trigger's progress has none and is left out.
* Spark jobs and stages: one JSON snapshot of the driver's status store (``AppStatusStore.jobsList`` and
  ``stageList`` through py4j, serialised by Spark's own REST writer, so that thousands of jobs cost one
  call). A streaming query runs its batches with the job group = its ``runId``, and so do the jobs a
  foreachBatch function starts (checked: a foreachBatch running two actions per batch had all its jobs
  in the query's group). A job belongs to the batch its description names (``batch = N``, set by Spark per
  batch), else to the batch of its query whose run contains the job's submission time.
* CPU: the benchmark process's own CPU time (the driver's Python: py4j, foreachBatch functions, listeners,
  deltaflow's event-log writer), the driver JVM's user + system time from ``/proc/<pid>/stat``, and the
  executors' CPU (``executorCpuTime`` + ``executorDeserializeCpuTime`` of the stages of the jobs), which
  in local mode run in that same JVM: driver JVM = JVM - executors. The JVM's CPU is also split by thread
  (``/proc/<pid>/task/*/stat``, by the threads' names): task threads, stream execution threads (a query's
  driver side: offsets, planning, commits, a foreachBatch's calls back into the JVM), JIT compilers, GC...
* Delta commits: the ``<version>.json`` files in every ``_delta_log`` under a run's folder.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from deltaflow.sinks.read_rows import observed_rows
from freshness_load import GoldLog

COMMIT = re.compile(r"^\d{20}\.json$")
BATCH = re.compile(r"\bbatch = (\d+)\s*$")
SLACK = 0.05  # seconds: job submission times and batch start times come from different clocks' rounding
PARTS = ("latestOffset", "getOffset", "setOffsetRange", "getEndOffset", "getBatch", "queryPlanning",
         "addBatch", "walCommit", "commitOffsets", "commitBatch")


def epoch(text: str) -> float:
    """Seconds since the epoch of Spark's ``2026-11-26T05:13:40.224GMT`` or ``...Z`` time stamps."""
    text = text.replace("GMT", "+00:00").replace("Z", "+00:00")
    return datetime.fromisoformat(text).timestamp()


# -- CPU ---------------------------------------------------------------------------------------------------

def _cpu(stat_file: str) -> tuple[str, float]:
    """(name, user + system CPU seconds) of a process or thread from its ``stat`` file."""
    stat = Path(stat_file).read_text()
    own = stat[stat.rindex(")") + 2:].split()  # after the name, which may hold spaces
    seconds = (int(own[11]) + int(own[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    return stat[stat.index("(") + 1:stat.rindex(")")], seconds


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (NaN without ``/proc``)."""
    try:
        return _cpu(f"/proc/{pid}/stat")[1]
    except (OSError, ValueError, IndexError):
        return math.nan


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """Per thread of ``pid``: its name (Linux keeps 15 characters) and CPU seconds so far."""
    out = {}
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError, IndexError):  # a thread may end meanwhile
                out[int(tid)] = _cpu(f"/proc/{pid}/task/{tid}/stat")
    return out


# The JVM's threads by what they do, from their native names.
THREADS = (("task threads (executors)", ("Executor task",)), ("stream execution threads", ("stream execut",)),
           ("JIT compilers", ("CompilerThre",)), ("garbage collector", ("GC Thread", "G1 ", "VM Thread")),
           ("listener bus", ("spark-listener",)))


def thread_shares(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]],
                  total: float) -> dict[str, float]:
    """CPU seconds of the JVM's threads between two readings, by :data:`THREADS` category."""
    shares = dict.fromkeys([c for c, _ in THREADS] + ["other threads"], 0.0)
    for tid, (name, cpu) in after.items():
        category = next((c for c, names in THREADS if any(n in name for n in names)), "other threads")
        shares[category] += cpu - before.get(tid, (name, 0.0))[1]
    shares["threads that ended meanwhile"] = total - sum(shares.values())
    return shares


def compiled_classes(spark: Any) -> int:
    """Spark's generated classes compiled so far in this JVM (``CodegenMetrics``: one per cache miss).

    Each is Janino's compile on the thread that planned it, then bytecode the JIT compilers take up.
    """
    return int(spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
               .METRIC_COMPILATION_TIME().getCount())


@dataclass
class Reading:
    """Wall clock and CPU of the driver's Python and JVM (and of each JVM thread) at one moment."""

    at: float
    python: float
    jvm: float
    threads: dict[int, tuple[str, float]]
    compiled: int

    @classmethod
    def now(cls, jvm_pid: int, spark: Any) -> Reading:
        return cls(time.time(), time.process_time(), process_cpu(jvm_pid), thread_cpu(jvm_pid),
                   compiled_classes(spark))


@dataclass
class TimedGoldLog(GoldLog):
    """A :class:`GoldLog` counting the CPU its replays take on the calling thread (the benchmark's own work,
    taken off the driver's Python CPU)."""

    spent: float = 0.0

    def advance(self) -> None:
        began = time.thread_time()
        try:
            super().advance()
        finally:
            self.spent += time.thread_time() - began


# -- micro-batches -----------------------------------------------------------------------------------------

@dataclass
class Batch:
    """One micro-batch that ran (with or without rows)."""

    batch_id: int
    start: float
    rows: int
    durations: dict[str, int]

    @property
    def end(self) -> float:
        return self.start + self.durations.get("triggerExecution", 0) / 1000


def batches(query: Any) -> list[Batch]:
    """The batches ``query`` ran, from its recent progress, oldest first (idle triggers left out)."""
    ran: dict[int, Batch] = {}
    for progress in query.recentProgress:
        durations = {k: int(v) for k, v in (progress.durationMs or {}).items()}
        if "addBatch" in durations:
            # a query that reads its input more than once counts the rows its flow read (sinks/read_rows)
            observed = observed_rows(json.loads(progress.json))
            rows = observed if observed is not None else int(progress.numInputRows or 0)
            ran[progress.batchId] = Batch(progress.batchId, epoch(progress.timestamp), rows, durations)
    return sorted(ran.values(), key=lambda b: b.batch_id)


# -- Spark jobs and stages ---------------------------------------------------------------------------------

@dataclass
class Job:
    job_id: int
    group: str | None
    submitted: float
    stage_ids: list[int]
    batch_id: int | None  # from the description Spark sets per micro-batch


@dataclass
class Jobs:
    """A snapshot of the driver's status store: every job retained, and each stage's executor CPU."""

    jobs: list[Job]
    cpu: dict[int, float]  # stage id -> executor CPU seconds, summed over its attempts
    ran: set[int]  # stages that ran (not skipped)

    @classmethod
    def snapshot(cls, spark: Any) -> Jobs:
        sc = spark.sparkContext
        store = sc._jsc.sc().statusStore()
        mapper = sc._jvm.org.apache.spark.status.api.v1.JacksonMessageWriter().mapper()
        jobs = []
        for job in json.loads(mapper.writeValueAsString(store.jobsList(None))):
            if "submissionTime" not in job:
                continue
            found = BATCH.search(job.get("description") or "")
            jobs.append(Job(int(job["jobId"]), job.get("jobGroup"), epoch(job["submissionTime"]),
                            [int(s) for s in job["stageIds"]], int(found.group(1)) if found else None))
        quantiles = sc._gateway.new_array(sc._jvm.double, 0)
        cpu: dict[int, float] = {}
        ran: set[int] = set()
        stages = store.stageList(None, False, False, quantiles, None)  # no task details, no summaries
        for stage in json.loads(mapper.writeValueAsString(stages)):
            sid = int(stage["stageId"])
            cpu[sid] = cpu.get(sid, 0.0) + (stage.get("executorCpuTime", 0)
                                            + stage.get("executorDeserializeCpuTime", 0)) / 1e9
            if stage.get("status") != "SKIPPED":
                ran.add(sid)
        return cls(jobs, cpu, ran)

    def within(self, began: float, until: float) -> list[Job]:
        return [j for j in self.jobs if began - SLACK <= j.submitted <= until + SLACK]

    def executor_cpu(self, jobs: list[Job]) -> float:
        return sum(self.cpu.get(s, 0.0) for s in {s for j in jobs for s in j.stage_ids})

    def stages_run(self, jobs: list[Job]) -> int:
        return sum(s in self.ran for j in jobs for s in j.stage_ids)

    def by_batch(self, group: str, ran: list[Batch]) -> dict[int, list[Job]]:
        """The jobs of query run ``group`` per batch of ``ran`` (by description, else by time)."""
        ids = {b.batch_id for b in ran}
        out: dict[int, list[Job]] = {b.batch_id: [] for b in ran}
        for job in self.jobs:
            if job.group != group:
                continue
            if job.batch_id is not None:
                if job.batch_id in ids:
                    out[job.batch_id].append(job)
                continue
            batch = next((b for b in ran if b.start - SLACK <= job.submitted <= b.end + SLACK), None)
            if batch is not None:
                out[batch.batch_id].append(job)
        return out


# -- Delta commits -----------------------------------------------------------------------------------------

def delta_commits(root: Path) -> dict[str, int]:
    """Commits so far of every Delta table under ``root``, by the table's folder."""
    out = {}
    for log in root.rglob("_delta_log"):
        if log.is_dir():
            out[str(log.parent)] = sum(1 for f in os.scandir(log) if COMMIT.match(f.name))
    return out


def commits_between(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {table: n - before.get(table, 0) for table, n in after.items() if n - before.get(table, 0)}


# -- one stage, one scenario -------------------------------------------------------------------------------

def median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def plain(value: Any) -> Any:
    """``value`` with NaN as None (strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


@dataclass
class StageProfile:
    """What one stage query did in one scenario window."""

    batches: int = 0  # batches with rows
    no_data: int = 0  # batches that ran without rows (watermark, state clean-up)
    rows: float = math.nan  # median rows of a batch with rows
    durations: list[float] = field(default_factory=list)  # triggerExecution (ms) of each batch with rows
    parts: dict[str, float] = field(default_factory=dict)  # median ms of each durationMs part
    jobs: float = math.nan  # Spark jobs per batch with rows
    stages: float = math.nan  # stages run per batch with rows
    executor_cpu_batch: float = math.nan  # executor CPU ms per batch with rows
    executor_cpu: float = 0.0  # executor CPU s of every job of the query in the window
    input_rows: int = 0
    commits: int = 0  # commits of the stage's target table in the window
    jobs_elsewhere: int = 0  # jobs of the query in the window in batches without rows, or between batches
    commits_per_batch: float = math.nan  # commits of its table per batch run (with or without rows)

    @property
    def duration(self) -> float:
        return median(self.durations)


@dataclass
class Scenario:
    """One contestant in one scenario window."""

    contestant: str
    scenario: str
    error: str | None = None
    seconds: float = math.nan  # the window
    events: int = 0
    python_cpu: float = math.nan
    jvm_cpu: float = math.nan
    executor_cpu: float = math.nan
    jobs: int = 0  # every Spark job submitted in the window
    other_jobs: int = 0  # ... outside the three stage queries' groups
    event_log_commits: int = 0
    other_commits: dict[str, int] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)  # input rate, catch-up, produce -> gold
    jvm_threads: dict[str, float] = field(default_factory=dict)  # JVM CPU seconds by thread category
    compiled: int = 0  # Spark's generated classes compiled in the window
    stages: dict[str, StageProfile] = field(default_factory=dict)

    @property
    def driver_jvm_cpu(self) -> float:
        return self.jvm_cpu - self.executor_cpu



def stage_profile(group: str, ran: list[Batch], jobs: Jobs, began: float, until: float,
                  commits: int) -> StageProfile:
    """Profile of one query over the batches it started between ``began`` and ``until``."""
    window = [b for b in ran if began - SLACK <= b.start <= until]
    full = [b for b in window if b.rows]
    profile = StageProfile(batches=len(full), no_data=len(window) - len(full), commits=commits,
                           input_rows=sum(b.rows for b in full))
    if window:
        profile.commits_per_batch = commits / len(window)
    mine = [j for j in jobs.within(began, until) if j.group == group]
    profile.executor_cpu = jobs.executor_cpu(mine)
    per_batch = jobs.by_batch(group, ran)
    with_rows = {j.job_id for b in ran if b.rows for j in per_batch[b.batch_id]}
    profile.jobs_elsewhere = sum(j.job_id not in with_rows for j in mine)
    if not full:
        return profile
    profile.rows = median([b.rows for b in full])
    profile.durations = [b.durations.get("triggerExecution", 0) for b in full]
    keys = {k for b in full for k in b.durations if k != "triggerExecution"}
    order = [k for k in PARTS if k in keys] + sorted(keys - set(PARTS))
    profile.parts = {k: median([b.durations.get(k, 0) for b in full]) for k in order}
    counted = [per_batch[b.batch_id] for b in full]
    profile.jobs = statistics.fmean(len(js) for js in counted)
    profile.stages = statistics.fmean(jobs.stages_run(js) for js in counted)
    profile.executor_cpu_batch = 1000 * statistics.fmean(jobs.executor_cpu(js) for js in counted)
    return profile
