"""The endurance run: one continuous pipeline for ``$DELTAFLOW_ENDURANCE_HOURS`` (2) hours, no kills.

``examples/clickstream`` runs as ``deltaflow run --continuous`` with automatic maintenance and short log
and file retention (:data:`SPEC_EXTRA`), fed steadily at a quarter of the sustainable rate ``benchmarks/
freshness.py`` measured on this machine (``$DELTAFLOW_ENDURANCE_RATE`` to choose). Every
:data:`SAMPLE_SECONDS` it samples the driver's memory (the Python process, the Spark JVM and its heap), and
the size and file count of every area on disk: checkpoints, state, the event log, each table's Delta log
and data. At the end the run is stopped with SIGTERM, a drain run reads what is left, and:

* every event is in bronze once and silver holds each event id once (nothing lost, nothing twice);
* no flow failed;
* after the first third (warm-up), how far bronze is behind the generator (so a rate the pipeline cannot
  keep up with fails), memory, batch durations and every area but the tables' data stay flat or bounded:
  the last third's highest value (the JVM heap's lowest, see :func:`bounded`) is at most :data:`GROWTH`
  times the middle third's (plus a little slack).
  The tables' data grows with the input (reported per million events), and so do the event log's rows,
  one per batch (reported per hour).

The report is ``test-artifacts/endurance.json`` and ``endurance.png`` (with matplotlib, which ``make
endurance`` installs).

    make endurance                          # 2 hours; ENDURANCE_HOURS=0.25 for a short one
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from helpers import cli, cli_env, sustainable_rate

HOURS = float(os.environ.get("DELTAFLOW_ENDURANCE_HOURS", "2"))
pytestmark = [pytest.mark.endurance, pytest.mark.timeout(int(HOURS * 3600) + 1_800)]
SAMPLE_SECONDS = max(10.0, HOURS * 3600 / 240)
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("DELTAFLOW_TEST_ARTIFACTS", "test-artifacts"))
#: Growth allowed from the middle third to the last: flat or bounded, not a leak or a pile-up.
GROWTH = 1.25
#: What bounds each area: maintenance compacts and vacuums, Delta keeps an hour of log and of removed files
#: (the shortest file retention a VACUUM beside running batches accepts; Delta wants the log kept at least as
#: long), Spark keeps 100 batches of checkpoint (minBatchesToRetain), the event log an hour of its own log.
SPEC_EXTRA = """
maintenance:
  optimize_every: 100
  vacuum_every: 10 minutes
table_properties:
  delta.logRetentionDuration: interval 1 hour
  delta.deletedFileRetentionDuration: interval 1 hour
"""


def rate() -> tuple[int, str]:
    """Events per second and why: ``$DELTAFLOW_ENDURANCE_RATE``, else a quarter of the sustainable rate.

    A quarter, not half: the sustainable rate comes from cells of a few minutes on empty tables, while over
    hours gold's state holds a whole hour of (hour, product, user) pairs, whose batches cost more; at half
    an earlier sustainable rate (3,315 events/s) the pipeline fell behind on 2 cores.
    """
    if given := os.environ.get("DELTAFLOW_ENDURANCE_RATE"):
        return int(given), "DELTAFLOW_ENDURANCE_RATE"
    sustainable, source = sustainable_rate(4_000)
    return sustainable // 4, f"a quarter of the sustainable rate {sustainable:,} events/s, {source}"


def memory_mib(pid: int) -> dict[str, float | None]:
    """The Python driver's and its Spark JVM's resident memory, and the JVM's heap in use (jstat)."""
    found: dict[str, float | None] = {"python_rss": None, "jvm_rss": None, "jvm_heap_used": None}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            rss = [int(line.split()[1]) for line in (proc / "status").read_text().splitlines()
                   if line.startswith("VmRSS")]
        except (OSError, IndexError, ValueError):
            continue
        if int(proc.name) == pid:
            found["python_rss"] = rss[0] / 1024 if rss else None
        elif parent == pid and "java" in (proc / "comm").read_text():
            found["jvm_rss"] = rss[0] / 1024 if rss else None
            jstat = shutil.which("jstat") or str(Path(os.environ.get("JAVA_HOME", "/usr")) / "bin" / "jstat")
            out = subprocess.run([jstat, "-gc", proc.name], capture_output=True, text=True).stdout.split()
            if len(out) >= 2 and len(out) % 2 == 0:
                columns = dict(zip(out[:len(out) // 2], out[len(out) // 2:], strict=True))
                used = sum(float(columns.get(k, 0)) for k in ("S0U", "S1U", "EU", "OU"))
                found["jvm_heap_used"] = used / 1024
    return found


def areas(storage: Path) -> dict[str, tuple[int, int]]:
    """(bytes, files) of each area under ``storage``."""
    def size(folder: Path, only: str = "**/*", skip: str | None = None) -> tuple[int, int]:
        sizes = []
        for f in folder.glob(only):
            if skip is None or skip not in f.parts:
                with contextlib.suppress(FileNotFoundError):  # a temporary file, gone since the listing
                    if f.is_file():
                        sizes.append(f.stat().st_size)
        return sum(sizes), len(sizes)

    found = {"checkpoints": size(storage / "_checkpoints"),
             "state": size(storage / "_checkpoints", "**/state/**/*"),
             "event_log": size(storage / "_event_log", skip="_delta_log"),
             "event_log/_delta_log": size(storage / "_event_log" / "_delta_log")}
    for table in sorted(p for p in (storage / "tables").glob("*") if p.is_dir()):
        found[f"{table.name}/_delta_log"] = size(table / "_delta_log")
        found[f"{table.name} data"] = size(table, skip="_delta_log")
    return found


def landed(storage: Path) -> int | None:
    """The rows in bronze, from its Delta log's file statistics (None: no table yet)."""
    try:
        actions = DeltaTable(str(storage / "tables" / "bronze_clicks")).get_add_actions(flatten=True)
    except Exception:  # not created yet
        return None
    return sum(n or 0 for n in actions.column("num_records").to_pylist())


def bounded(series: list[float], slack: float, low: bool = False) -> bool:
    """Flat or bounded after warm-up: the last third's peak (``low``: floor) within GROWTH of the middle's.

    The JVM's heap in use is judged by its floor, what the collector leaves, where a leak shows: its peaks
    are the young generation filling up between collections, as large as the collector lets it grow.
    """
    third = len(series) // 3
    if third < 2:
        return True
    pick = min if low else max
    middle, last = pick(series[third:2 * third]), pick(series[2 * third:])
    return last <= middle * GROWTH + slack


def test_endurance(spark, kafka_bootstrap: str, tmp_path: Path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from deltaflow.dev.generator import EventGenerator
    from deltaflow.dev.topics import create_topic

    events_per_second, rate_source = rate()
    print(f"endurance: {events_per_second:,} events/s ({rate_source})")
    create_topic(kafka_bootstrap, "clicks", partitions=3)
    project = tmp_path / "clickstream"
    shutil.copytree(ROOT / "examples" / "clickstream", project)
    with (project / "deltaflow.yml").open("a") as spec:
        spec.write(SPEC_EXTRA)
    storage = tmp_path / "storage"
    env = {**cli_env(), "DELTAFLOW_KAFKA": kafka_bootstrap, "DELTAFLOW_STORAGE": str(storage),
           "JDK_JAVA_OPTIONS": ""}  # the JVM as users run it, not the tests' short-run tuning
    generator = EventGenerator(kafka_bootstrap, "clicks", rate=events_per_second, seed=9)
    log = (tmp_path / "run.log").open("wb")
    command = [sys.executable, "-m", "deltaflow", "run", "--continuous", "--quiet", "--spec", str(project)]
    run = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    generator.start()
    samples: list[dict[str, Any]] = []
    start = time.monotonic()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    while time.monotonic() - start < HOURS * 3600:
        time.sleep(SAMPLE_SECONDS)
        assert run.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
        produced, bronze_rows = generator.produced, landed(storage)
        samples.append({"t": round(time.monotonic() - start), **memory_mib(run.pid), **areas(storage),
                        "produced": produced,
                        "behind": None if bronze_rows is None else max(0, produced - bronze_rows)})
        # kept as they come: a run that dies still leaves what led up to it
        (ARTIFACTS / "endurance-samples.json").write_text(json.dumps(samples, default=str))
    generator.stop()
    generator.join(60)
    run.send_signal(signal.SIGTERM)
    assert run.wait(300) == 0, (tmp_path / "run.log").read_text()[-3000:]
    for name, value in env.items():
        if name.startswith("DELTAFLOW_"):
            monkeypatch.setenv(name, value)
    drained = cli(capsys, "run", "--available-now", "--spec", str(project))
    assert drained.returncode == 0, drained.stderr[-3000:]

    bronze = DeltaTable(str(storage / "tables" / "bronze_clicks")).to_pyarrow_table(
        columns=["partition", "offset"]).to_pylist()
    silver = DeltaTable(str(storage / "tables" / "silver_clicks")).to_pyarrow_table(
        columns=["event_id"]).column("event_id").to_pylist()
    events = DeltaTable(str(storage / "_event_log")).to_pyarrow_table(
        columns=["flow", "kind", "end_time", "duration_ms", "error"]).to_pylist()
    first = min(e["end_time"] for e in events)
    batches: dict[str, dict[int, list[int]]] = {}
    for e in events:
        if e["kind"] == "batch":
            slot = int((e["end_time"] - first).total_seconds() // (SAMPLE_SECONDS * 10))
            batches.setdefault(e["flow"], {}).setdefault(slot, []).append(e["duration_ms"])
    durations = {flow: [statistics.median(v) for _, v in sorted(slots.items())]
                 for flow, slots in batches.items()}
    memory = ("python_rss", "jvm_rss", "jvm_heap_used")
    disk = [k for k in samples[-1] if "/" in k or k in ("checkpoints", "state")]
    verdict = {
        # half a minute of input: batches take in what came while the one before ran
        "behind": bounded([s["behind"] for s in samples if s["behind"] is not None],
                          slack=events_per_second * 30),
        **{m: bounded([s[m] for s in samples if s[m] is not None], slack=64, low=m == "jvm_heap_used")
           for m in memory},
        **{d: bounded([s[d][0] for s in samples if d in s], slack=4 * 2**20) for d in disk},
        **{f"{flow} batch ms": bounded(v, slack=500) for flow, v in durations.items()},
    }
    report = {
        "hours": HOURS, "events_per_second": events_per_second, "rate_source": rate_source,
        "sample_seconds": SAMPLE_SECONDS,
        "spec_extra": SPEC_EXTRA.strip(), "produced": generator.produced, "bronze_rows": len(bronze),
        "data_bytes_per_million_events": {
            k: round(samples[-1][k][0] / max(1, samples[-1]["produced"]) * 1e6)
            for k in samples[-1] if k.endswith(" data")},
        "event_log_bytes_per_hour": round(samples[-1]["event_log"][0] / max(1, samples[-1]["t"]) * 3600),
        "bounded_after_warm_up": verdict, "batch_ms_median_by_slot": durations, "samples": samples,
        "failed_flows": [f"{e['flow']}: {e['error']}" for e in events if e["kind"] == "failed"],
    }
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "endurance.json").write_text(json.dumps(report, indent=1, default=str))
    chart(report, ARTIFACTS / "endurance.png")
    print(json.dumps({k: v for k, v in report.items() if k != "samples"}, indent=1, default=str))

    assert not report["failed_flows"], report["failed_flows"]
    assert len(bronze) == len({(r["partition"], r["offset"]) for r in bronze}) == generator.produced
    assert len(silver) == len(set(silver))
    assert all(verdict.values()), {k: v for k, v in verdict.items() if not v}


def chart(report: dict[str, Any], path: Path) -> None:
    """Memory, batch durations and the areas on disk over the run (skipped without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    samples = report["samples"]
    minutes = [s["t"] / 60 for s in samples]
    fig, (mem, dur, disk) = plt.subplots(3, 1, figsize=(10, 11))
    for key in ("python_rss", "jvm_rss", "jvm_heap_used"):
        mem.plot(minutes, [s[key] for s in samples], label=key)
    mem.set(ylabel="MiB", title=f"{report['events_per_second']:,} events/s for {report['hours']} h")
    for flow, values in report["batch_ms_median_by_slot"].items():
        step = report["sample_seconds"] * 10 / 60
        dur.plot([i * step for i in range(len(values))], values, label=flow)
    dur.set(ylabel="batch ms (median)")
    behind = dur.twinx()
    behind.plot(minutes, [s.get("behind") for s in samples], color="grey", linestyle=":",
                label="events behind")
    behind.set(ylabel="events produced, not in bronze yet")
    behind.legend(fontsize=7, loc="upper right")
    for key in samples[-1]:
        if isinstance(samples[-1][key], list | tuple) and not key.endswith(" data"):
            disk.plot(minutes, [s[key][0] / 2**20 if key in s else None for s in samples], label=key)
    disk.set(ylabel="MiB on disk", xlabel="minutes")
    for axis in (mem, dur, disk):
        axis.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
