"""The profile's markdown table: deltaflow against one baseline, stage by stage and scenario by scenario."""

from __future__ import annotations

import argparse
import math
from typing import Any

from freshness_contestants import Deltaflow
from profile_probe import PARTS, Scenario

STAGES = ("bronze", "bronze+silver", "silver", "gold")  # a bronze query that carries silver: one column
FEW, ROUNDS = 10, 3  # the fixed-cost batches: events per round, rounds
PER = 100_000  # CPU is reported per this many events


def number(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    if abs(value) >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def cells(ours: float | None, theirs: float | None, shown: tuple[str, str] | None = None) -> list[str]:
    ratio = "–"
    if ours is not None and theirs and math.isfinite(ours) and math.isfinite(theirs):
        ratio = f"{ours / theirs:.2f}×"
    return [*(shown or (number(ours), number(theirs))), ratio]


def per(value: float, events: int) -> float:
    return value * PER / events if events else math.nan


def section(name: str, title: str, ours: Scenario, theirs: Scenario) -> list[list[str]]:
    blank = ["", "", ""]
    rows = [[f"**{title}**", *blank * 4]]
    if ours.error or theirs.error:
        return [*rows, ["failed: " + "; ".join(e for e in (ours.error, theirs.error) if e), *blank * 4]]

    def stage_row(label: str, get: Any, pipeline: tuple[float, float] | None = None,
                  show: Any = None) -> None:
        row = [label]
        for stage in STAGES:
            a, b = ours.stages.get(stage), theirs.stages.get(stage)
            if a is None and b is None:
                row += blank
                continue
            row += cells(get(ours, a) if a else None, get(theirs, b) if b else None,
                         (show(a) if a else "", show(b) if b else "") if show else None)
        rows.append(row + (cells(*pipeline) if pipeline else blank))

    def pipeline_row(label: str, a: float, b: float) -> None:
        rows.append([label, *blank * 3, *cells(a, b)])

    batches = (sum(s.batches for s in ours.stages.values()), sum(s.batches for s in theirs.stages.values()))
    stage_row("batches with rows (+ without)", lambda x, s: s.batches, batches,
              show=lambda s: f"{s.batches} (+{s.no_data})")
    stage_row("rows per batch, median", lambda x, s: s.rows)
    stage_row("batch duration, median ms", lambda x, s: s.duration)
    keys = {k for x in (ours, theirs) for s in x.stages.values() for k, v in s.parts.items() if v}
    for part in [k for k in PARTS if k in keys] + sorted(keys - set(PARTS)):
        stage_row(f"  ↳ {part}, median ms", lambda x, s, p=part: s.parts.get(p, math.nan))
    stage_row("Spark jobs / batch", lambda x, s: s.jobs)
    stage_row("stages run / batch", lambda x, s: s.stages)
    stage_row("executor CPU / batch, ms", lambda x, s: s.executor_cpu_batch)
    if name != "fixed":
        stage_row(f"executor CPU / {PER // 1000}k events, s", lambda x, s: per(s.executor_cpu, x.events),
                  (per(ours.executor_cpu, ours.events), per(theirs.executor_cpu, theirs.events)))
        pipeline_row(f"driver Python CPU / {PER // 1000}k events, s", per(ours.python_cpu, ours.events),
                     per(theirs.python_cpu, theirs.events))
        pipeline_row(f"driver JVM CPU / {PER // 1000}k events, s (JVM − executors)",
                     per(ours.driver_jvm_cpu, ours.events), per(theirs.driver_jvm_cpu, theirs.events))
        pipeline_row(f"all CPU / {PER // 1000}k events, s (Python + JVM)",
                     per(ours.python_cpu + ours.jvm_cpu, ours.events),
                     per(theirs.python_cpu + theirs.jvm_cpu, theirs.events))
        for key in ours.jvm_threads:
            pipeline_row(f"  JVM: {key} / {PER // 1000}k events, s", per(ours.jvm_threads[key], ours.events),
                         per(theirs.jvm_threads.get(key, math.nan), theirs.events))
    else:
        pipeline_row("driver Python CPU / round, s", ours.python_cpu / ROUNDS, theirs.python_cpu / ROUNDS)
        pipeline_row("driver JVM CPU / round, s (JVM − executors)", ours.driver_jvm_cpu / ROUNDS,
                     theirs.driver_jvm_cpu / ROUNDS)
    pipeline_row("Spark classes generated and compiled / batch", ours.compiled / max(batches[0], 1),
                 theirs.compiled / max(batches[1], 1))
    stage_row("Delta commits of its table / batch run", lambda x, s: s.commits_per_batch)
    stage_row("Spark jobs of the query outside batches with rows", lambda x, s: s.jobs_elsewhere)
    pipeline_row("Spark jobs outside the three queries", ours.other_jobs, theirs.other_jobs)
    rows.append(["event-log commits", *blank * 3, str(ours.event_log_commits), "(none)", "–"])
    for key in dict.fromkeys([*ours.extra, *theirs.extra]):
        pipeline_row(key, ours.extra.get(key, math.nan), theirs.extra.get(key, math.nan))
    pipeline_row("events in the window", ours.events, theirs.events)
    return rows


def table(results: list[Scenario], args: argparse.Namespace, baseline: str, short: str) -> str:
    """deltaflow against ``baseline`` (its column headed ``short``), scenario by scenario."""
    titles = {"backlog": f"backlog: {args.backlog:,} events waiting, run until all in gold",
              "steady": f"steady: {args.rate:,.0f} events/s, {args.duration:.0f} s after {args.warm_up:g} s",
              "fixed": f"fixed cost: {ROUNDS} rounds of {FEW} events after the steady run"}
    who = ("deltaflow", short, "×")
    head = ["measure"] + [f"{part}: {w}" for part in (*STAGES, "pipeline") for w in who]
    rows = [head, ["---", *["---:"] * (len(head) - 1)]]
    for name, title in titles.items():
        found = {r.contestant: r for r in results if r.scenario == name}
        if Deltaflow.name in found and baseline in found:
            rows += section(name, title, found[Deltaflow.name], found[baseline])
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


