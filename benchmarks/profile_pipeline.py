"""Where a micro-batch's time goes, stage by stage: deltaflow's clickstream vs the hand-written exact jobs.

The contestants are ``freshness.py``'s: ``examples/clickstream`` run by deltaflow (bronze -> silver with
dedup -> gold, an incremental materialized view in a foreachBatch) and the seed's jobs doing the same work
by hand (``HandWrittenExact``: silver drops duplicates, gold counts distinct users exactly through Spark's
deduplication state, complete mode). Both run at trigger 0 with ``maxOffsetsPerTrigger`` 50,000, one at a
time, on one embedded broker and one SparkSession, each run on a fresh 3-partition topic and a fresh folder.
Each first works through a small discarded backlog (JVM and caches warm), then, deltaflow first in the
backlog and last in the steady scenario:

1. backlog: ``--backlog`` events produced first, the pipeline started and run until gold holds them all;
2. steady: generator processes (``freshness_load.Load``) produce ``--rate`` events/s; after gold's first
   rows and ``--warm-up`` s, ``--duration`` s are measured; then the load stops and the pipeline catches up;
3. fixed cost: then, three times, 10 events are produced and awaited in gold: what a batch of a few rows
   costs each stage.

Per stage and scenario, from each query's progress (batches that ran; "with rows" unless said): the median
``triggerExecution`` and the median of each ``durationMs`` part; Spark jobs and stages run per batch, from
the driver's status store through py4j: every job of a query's batch, including those a foreachBatch
function starts, runs in the job group = the query's ``runId`` (checked with a foreachBatch running two
actions per batch: all its jobs were in the group), and the job's description names its batch; executor
CPU (``executorCpuTime`` + ``executorDeserializeCpuTime`` of the jobs' stages); Delta commits of the
stage's table. For the whole pipeline: the CPU of the driver's Python (this process, less its own replays
of gold's log), of the driver JVM (``/proc/<pid>/stat`` less the executors' share: local mode runs the
tasks in that JVM; also split by thread: tasks, stream execution, JIT, GC, listener bus...) and of the
executors, per 100,000 events; jobs outside the three queries; deltaflow's event-log commits
(``<storage>/_event_log``). One markdown table, deltaflow against the hand-written jobs stage by stage;
``results/profile_pipeline.json`` holds every measurement. ``--quick``: 100,000 events, 30 s steady.
Details of the instruments: ``profile_probe.py``.

    .venv/bin/python benchmarks/profile_pipeline.py [--backlog 1000000] [--rate 5000] [--duration 60]
        [--warm-up 15] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import tempfile
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from deltaflow.dev.broker import EmbeddedKafka
from deltaflow.dev.generator import clickstream_event, produce, user_key
from deltaflow.dev.topics import admin_client, create_topic
from freshness import Runs, free_port
from freshness_contestants import Contestant, Deltaflow, HandWritten, HandWrittenExact, wait_for
from freshness_load import Load
from profile_probe import (
    Jobs,
    Reading,
    Scenario,
    TimedGoldLog,
    batches,
    commits_between,
    delta_commits,
    median,
    plain,
    stage_profile,
    thread_shares,
)
from profile_table import FEW, PER, ROUNDS, STAGES, number, per, table
from results import RESULTS, Figure, machine_line, save, versions_line

MAX_OFFSETS = 50_000  # examples/clickstream's own maxOffsetsPerTrigger, given to both


class Run:
    """One contestant started on a fresh topic and folder, with what measuring it needs."""

    def __init__(self, spark: Any, make: Contestant, root: Path, bootstrap: str) -> None:
        self.spark, self.root, self.bootstrap = spark, root, bootstrap
        self.topic = f"fresh-{root.name}"
        create_topic(bootstrap, self.topic, partitions=3)
        self.job = make(spark, root, bootstrap, self.topic, max_offsets=MAX_OFFSETS)
        self.jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        self.queries: dict[str, Any] = {}

    def start(self) -> None:
        self.job.start()
        self.log = TimedGoldLog(self.job.gold)
        gold = Path(self.job.gold)
        if isinstance(self.job, Deltaflow):
            self.tables = {stage: [str(gold.parent / name) for name in names] for stage, names in
                           (("bronze", ["bronze_clicks"]), ("silver", ["silver_clicks"]),
                            ("bronze+silver", ["bronze_clicks", "silver_clicks"]), ("gold", [gold.name]))}
            self.event_log = str(gold.parents[1] / "_event_log")
        else:
            self.tables = {s: [str(gold.parents[1] / s / "clickstream")] for s in ("bronze", "silver")}
            self.tables["gold"], self.event_log = [str(gold)], ""

    def produce(self, events: int, seed: int) -> None:
        rng = random.Random(seed)
        stream = (clickstream_event(rng, datetime.now(UTC)) for _ in range(events))
        produce(self.bootstrap, self.topic, stream, user_key)

    def wait_gold(self, events: int, timeout: float, what: str) -> None:
        wait_for(self.log, self.job, lambda: self.log.events >= events, timeout, what)

    def mark(self, ending: bool = False) -> tuple[Reading, dict[str, int], float]:
        """CPU, Delta commits and the log's replay CPU now (the folder scanned outside the window)."""
        spent = self.log.spent if hasattr(self, "log") else 0.0
        if ending:
            reading = Reading.now(self.jvm_pid, self.spark)
            return reading, delta_commits(self.root), spent
        commits = delta_commits(self.root)
        return Reading.now(self.jvm_pid, self.spark), commits, spent

    def stop(self) -> str | None:
        self.queries = self.job.stage_queries()
        error = self.job.stop()
        with contextlib.suppress(Exception):  # only disk space is at stake
            admin_client(self.bootstrap).delete_topics([self.topic], operation_timeout=10)
        return error

    def profile(self, scenario: Scenario, began: tuple[Reading, dict[str, int], float],
                ended: tuple[Reading, dict[str, int], float], jobs: Jobs, events: int | None = None) -> None:
        """Fill ``scenario`` with what happened between the marks ``began`` and ``ended``."""
        (r0, c0, spent0), (r1, c1, spent1) = began, ended
        commits = commits_between(c0, c1)
        groups = {}
        for stage, query in self.queries.items():
            groups[stage] = str(query.runId)
            scenario.stages[stage] = stage_profile(groups[stage], batches(query), jobs, r0.at, r1.at,
                                                   sum(commits.pop(t, 0) for t in self.tables[stage]))
        scenario.event_log_commits = commits.pop(self.event_log, 0) if self.event_log else 0
        scenario.other_commits = {str(Path(t).relative_to(self.root)): n for t, n in commits.items()}
        window = jobs.within(r0.at, r1.at)
        scenario.jobs = len(window)
        scenario.other_jobs = sum(j.group not in groups.values() for j in window)
        scenario.seconds = r1.at - r0.at
        first = scenario.stages.get("bronze") or scenario.stages["bronze+silver"]
        scenario.events = events if events is not None else first.input_rows
        scenario.python_cpu = (r1.python - r0.python) - (spent1 - spent0)
        scenario.jvm_cpu = r1.jvm - r0.jvm
        scenario.executor_cpu = jobs.executor_cpu(window)
        scenario.jvm_threads = thread_shares(r0.threads, r1.threads, scenario.jvm_cpu)
        scenario.compiled = r1.compiled - r0.compiled


def warm_up(spark: Any, make: Contestant, runs: Runs, bootstrap: str, events: int) -> None:
    run = Run(spark, make, runs.root(f"{make.name}-warm-up"), bootstrap)
    run.produce(events, 1)
    run.start()
    try:
        run.wait_gold(events, 600, f"{events:,} warm-up events in gold")
    finally:
        run.stop()


def backlog(spark: Any, make: Contestant, runs: Runs, bootstrap: str, events: int) -> Scenario:
    scenario = Scenario(make.name, "backlog")
    run = Run(spark, make, runs.root(f"{make.name}-backlog"), bootstrap)
    run.produce(events, 2)
    began = run.mark()
    try:
        run.start()
        run.wait_gold(events, 1800, f"{events:,} events in gold")
        ended = run.mark(ending=True)
    except RuntimeError as exc:
        scenario.error = str(exc)
    scenario.error = run.stop() or scenario.error
    if scenario.error is None:
        run.profile(scenario, began, ended, Jobs.snapshot(spark), events)
        scenario.extra["all in gold after (s)"] = scenario.seconds
    return scenario


def steady(spark: Any, make: Contestant, runs: Runs, bootstrap: str,
           args: argparse.Namespace) -> tuple[Scenario, Scenario]:
    """The steady scenario, and then the fixed-cost one on the same run."""
    scenario, fixed = Scenario(make.name, "steady"), Scenario(make.name, "fixed")
    run = Run(spark, make, runs.root(f"{make.name}-steady"), bootstrap)
    run.start()
    load = Load(bootstrap, run.topic, args.rate)
    rounds: list[float] = []
    try:
        run.wait_gold(1, 300, "first events in gold")
        time.sleep(args.warm_up)
        began = run.mark()
        deadline = time.monotonic() + args.duration
        while time.monotonic() < deadline:  # no replay of gold's log in the window: only a check per second
            if (error := run.job.error()) is not None:
                raise RuntimeError(f"{make.name} failed: {error}")
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        ended = run.mark(ending=True)
        stopped = time.time()
        load.stop()
        produced = sum(m[1] for m in load.messages if m[0] == "generated")
        run.wait_gold(produced, 600, f"all {produced:,} events in gold after the load stopped")
        scenario.extra["input rate (events/s)"] = load.rate
        caught_up = run.log.first_with(produced) or stopped
        scenario.extra["all in gold after the load stopped (s)"] = caught_up - stopped
        time.sleep(2)
        fixed_began = run.mark()
        for n in range(ROUNDS):
            at = time.time()
            run.produce(FEW, 10 + n)
            run.wait_gold(produced + (n + 1) * FEW, 120, f"round {n + 1} of {FEW} events in gold")
            done = run.log.first_with(produced + (n + 1) * FEW)
            rounds.append((done or time.time()) - at)
            time.sleep(2)
        fixed_ended = run.mark(ending=True)
    except RuntimeError as exc:
        scenario.error = fixed.error = str(exc)
    finally:
        with contextlib.suppress(Exception):
            load.stop()
        error = run.stop()
    if error or scenario.error:
        scenario.error = fixed.error = scenario.error or error
        return scenario, fixed
    if load.problems:
        scenario.error = "; ".join(load.problems)
    jobs = Jobs.snapshot(spark)
    run.profile(scenario, began, ended, jobs, round(load.rate * (ended[0].at - began[0].at)))
    run.profile(fixed, fixed_began, fixed_ended, jobs, ROUNDS * FEW)
    fixed.extra["produce -> in gold, median (s)"] = median(rounds)
    return scenario, fixed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=1_000_000, help="events of the backlog scenario")
    parser.add_argument("--rate", type=float, default=5_000, help="events/s of the steady scenario")
    parser.add_argument("--duration", type=float, default=60, help="seconds measured at the steady rate")
    parser.add_argument("--warm-up", type=float, default=15, help="seconds at the steady rate not measured")
    parser.add_argument("--quick", action="store_true", help="smoke run: 100,000 events backlog, 30 s steady")
    args = parser.parse_args()
    if args.quick:
        given = sys.argv[1:]
        args.backlog = args.backlog if "--backlog" in given else 100_000
        args.duration = args.duration if "--duration" in given else 30
    began = time.monotonic()

    from deltaflow.runtime.session import build_session

    print(f"machine: {machine_line()}")
    contestants: list[Contestant] = [Deltaflow, HandWritten, HandWrittenExact]
    results: list[Scenario] = []
    with tempfile.TemporaryDirectory(prefix="deltaflow-profile-") as tmp_name:
        tmp = Path(tmp_name)
        with EmbeddedKafka(state_dir=tmp / "kafka", port=free_port()) as broker:
            bootstrap = broker.status().bootstrap or ""
            keep = {key: "100000" for key in ("spark.ui.retainedJobs", "spark.ui.retainedStages",
                                              "spark.sql.streaming.numRecentProgressUpdates")}
            spark = build_session(extra={"spark.sql.warehouse.dir": str(tmp / "wh"), **keep})
            print(f"versions: {versions_line(spark)}")
            runs = Runs(tmp)
            warm = max(2_000, args.backlog // 50)
            for make in contestants:
                print(f"warm-up: {make.name}, {warm:,} events (discarded) ...", flush=True)
                warm_up(spark, make, runs, bootstrap, warm)
            for make in contestants:
                print(f"backlog: {make.name}, {args.backlog:,} events ... ", end="", flush=True)
                results.append(backlog(spark, make, runs, bootstrap, args.backlog))
                print(results[-1].error or f"all in gold after {results[-1].seconds:.1f} s")
            for make in reversed(contestants):
                print(f"steady: {make.name}, {args.rate:,.0f} events/s ... ", end="", flush=True)
                results += steady(spark, make, runs, bootstrap, args)
                first = results[-2].stages.get("bronze") or results[-2].stages.get("bronze+silver")
                print(results[-2].error or f"{first.batches if first else 0} bronze batches measured")
            spark.stop()
    for baseline, short in ((HandWritten.name, "seed's"), (HandWrittenExact.name, "exact")):
        print(f"\n### deltaflow against {baseline}\n\n{table(results, args, baseline, short)}\n")
    print("×: deltaflow / the baseline (above 1: deltaflow spends more). Batches are those with rows "
          "unless said; CPU in CPU-seconds; the backlog's window includes the pipeline's start; the steady "
          "window's events = the generators' rate × its length.")
    print(f"machine: {machine_line()}")
    print(f"versions: {versions_line()}")
    print(f"total time {time.monotonic() - began:.0f} s", flush=True)
    data = {"args": vars(args), "scenarios": plain([asdict(r) for r in results])}
    figures = []
    steady_runs = {r.contestant: r for r in results if r.scenario == "steady" and not r.error}
    ours = steady_runs.get(Deltaflow.name)
    for baseline in (HandWritten.name, HandWrittenExact.name):
        if ours is None or (theirs := steady_runs.get(baseline)) is None:
            continue
        for stage in STAGES:
            if all(stage in run.stages and run.stages[stage].durations for run in (ours, theirs)):
                rows = " against ".join(number(run.stages[stage].rows) for run in (ours, theirs))
                figures.append(Figure(f"{stage} median batch duration at {args.rate:,.0f} events/s", "ms",
                                      ours.stages[stage].durations, theirs.stages[stage].durations,
                                      baseline, higher_is_better=False,
                                      note=f"Spark's triggerExecution of each batch with rows, trigger 0 "
                                           f"(each takes what came during the last; median rows {rows})"))
    scenarios = (("backlog", f"backlog of {args.backlog:,}"), ("steady", f"{args.rate:,.0f} events/s"))
    for name, title in scenarios:
        done = {r.contestant: r for r in results if r.scenario == name and not r.error}
        for baseline, target in ((HandWritten.name, 1.0), (HandWrittenExact.name, None)):
            if Deltaflow.name in done and baseline in done:
                ours_cpu, their_cpu = (per(done[n].python_cpu + done[n].jvm_cpu, done[n].events)
                                       for n in (Deltaflow.name, baseline))
                figures.append(Figure(f"CPU-seconds per {PER:,} events, whole pipeline, {title}", "s",
                                      [ours_cpu], [their_cpu], baseline, higher_is_better=False,
                                      target=target,
                                      target_text="≤ 1.0× the seed's jobs" if target else "",
                                      note="driver Python + JVM (local mode: the executors' tasks too)"))
    if figures:
        save("profile_pipeline", "Micro-batch profile per stage: deltaflow vs the seed's jobs and the exact "
             "ones", figures, data=data)
    else:  # no steady figures (a contestant failed): the raw measurements alone
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "profile_pipeline.json").write_text(json.dumps(data, indent=1) + "\n")
        print(f"\nsaved {RESULTS / 'profile_pipeline.json'} (raw measurements only)")


if __name__ == "__main__":
    main()
