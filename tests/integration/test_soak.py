"""The soak: clickstream and customers_cdc running continuously for ``$DELTAFLOW_SOAK_MINUTES`` (30) minutes.

Both pipelines run side by side on the session's broker, each a ``deltaflow run --continuous`` process
with compaction and VACUUM underneath (``maintenance:``), customers_cdc's change-feed reader
(``customers_audit``) among its flows, while generators feed them (``$DELTAFLOW_SOAK_CLICKS`` clicks/s,
by default a quarter of the clickstream's sustainable rate ``benchmarks/freshness.py`` measured on this
machine, and a tenth of that in customer changes/s, ``$DELTAFLOW_SOAK_CHANGES``). Every ``KILL_EVERY``
seconds one of them is SIGKILLed and started again. At the end both stop, a last available-now run drains
what is left, and:

* every click is in ``bronze_clicks`` once, and ``silver_clicks`` holds each event id once;
* ``customers`` (SCD 1), ``customers_history`` (SCD 2) and the audit read from the change feed equal a
  reference model of the change log;
* no flow failed.

The report (``test-artifacts/soak.json``, printed too) has the events produced against landed per table,
each run's memory (Python driver plus Spark JVM) over time, and batch durations over time.

    make soak            # 30 minutes; not part of `make test`
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_model import COLUMNS, replay, scd1, scd2
from helpers import cli, cli_env, kill_group, sustainable_rate

MINUTES = float(os.environ.get("DELTAFLOW_SOAK_MINUTES", "30"))
# pytest's default timeout (15 minutes) is shorter than the soak: give it its length and 20 minutes more
pytestmark = [pytest.mark.soak, pytest.mark.timeout(int(MINUTES * 60) + 1_200)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SUSTAINABLE, RATE_SOURCE = sustainable_rate(8_000)
#: A quarter of what the clickstream pipeline sustains alone: the two pipelines share the cores, and each
#: restart after a kill catches up on what arrived while it was down, at the same time as new input.
CLICKS = int(os.environ.get("DELTAFLOW_SOAK_CLICKS", SUSTAINABLE // 4))
CHANGES = int(os.environ.get("DELTAFLOW_SOAK_CHANGES", CLICKS // 10))
KILL_EVERY = max(30.0, min(240.0, MINUTES * 60 / 8))
ARTIFACTS = Path(os.environ.get("DELTAFLOW_TEST_ARTIFACTS", "test-artifacts"))
MAINTENANCE = "maintenance:\n  optimize_every: 25\n  vacuum_every: 180s\n"


def rss_kib(pid: int) -> int:
    """Resident memory of ``pid`` and its children (the Spark JVM), in KiB."""
    total = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            status = (proc / "status").read_text()
        except OSError:
            continue
        if int(proc.name) == pid or int(stat[1]) == pid:
            rss = [int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")]
            total += rss[0] if rss else 0
    return total


class Pipeline:
    """One example under ``deltaflow run --continuous``, restartable."""

    def __init__(self, name: str, root: Path, env: dict[str, str]) -> None:
        self.name, self.root, self.env = name, root, env
        shutil.copytree(EXAMPLES / name, root / "project")
        with (root / "project" / "deltaflow.yml").open("a") as spec:
            spec.write(MAINTENANCE)
        self.spec = root / "project"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        log = (self.root / f"run-{self.starts}.log").open("wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "deltaflow", "run", "--continuous", "--quiet",
                                      "--spec", str(self.spec)], stdout=log, stderr=subprocess.STDOUT,
                                     env=self.env, start_new_session=True)
        self.starts += 1

    def kill(self) -> None:
        assert self.proc is not None
        assert self.proc.poll() is None, f"{self.name} ended: see {self.root}/run-{self.starts - 1}.log"
        kill_group(self.proc)

    def stop(self) -> None:
        assert self.proc is not None and self.proc.poll() is None, f"{self.name} ended by itself"
        self.proc.terminate()
        assert self.proc.wait(300) == 0, f"{self.name}: see {self.root}/run-{self.starts - 1}.log"


def test_soak(spark, kafka_bootstrap: str, tmp_path: Path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from deltaflow.dev.generator import EventGenerator, field_key, produce
    from deltaflow.dev.sample_data import customer_changes
    from deltaflow.dev.topics import create_topic

    topic = f"changes-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, "clicks", partitions=3)
    create_topic(kafka_bootstrap, topic, partitions=3)
    # the JVM as users run it: cli_env's short-run tuning (C1 only, serial GC) is not for 30 minutes
    base = {**cli_env(), "DELTAFLOW_KAFKA": kafka_bootstrap, "DELTAFLOW_TOPIC": topic, "JDK_JAVA_OPTIONS": ""}
    clicks = Pipeline("clickstream", tmp_path / "clicks", {**base, "DELTAFLOW_STORAGE": str(tmp_path / "c")})
    cdc = Pipeline("customers_cdc", tmp_path / "cdc", {**base, "DELTAFLOW_STORAGE": str(tmp_path / "d")})
    seconds = MINUTES * 60
    changes = customer_changes(2_000, int(CHANGES * seconds) + 1, seed=11, disorder=40, duplicates=0.05,
                               delete_share=0.08)
    clicker = EventGenerator(kafka_bootstrap, "clicks", rate=CLICKS, seed=5)
    done = threading.Event()
    fed = [0]  # changes produced, in the list's order

    def feed_changes() -> None:
        for at in range(0, len(changes), CHANGES):
            chunk = changes[at:at + CHANGES]
            fed[0] += produce(kafka_bootstrap, topic, chunk, key_fn=field_key("customer_id"))
            if done.wait(1.0):
                break

    feeder = threading.Thread(target=feed_changes, daemon=True)
    memory: dict[str, list[tuple[float, int]]] = {"clickstream": [], "customers_cdc": []}
    start = time.monotonic()

    def sample() -> None:
        while not done.wait(15):
            for pipeline in (clicks, cdc):
                if pipeline.proc is not None and pipeline.proc.poll() is None:
                    memory[pipeline.name].append((time.monotonic() - start, rss_kib(pipeline.proc.pid)))

    clicker.start()
    feeder.start()
    clicks.start()
    cdc.start()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    kills = 0
    rng = random.Random(3)
    while time.monotonic() - start < seconds - KILL_EVERY / 2:
        time.sleep(KILL_EVERY / 2 + rng.uniform(-5, 5))
        victim = (clicks, cdc)[kills % 2]
        victim.kill()
        victim.start()
        kills += 1
    while time.monotonic() - start < seconds:
        time.sleep(1)
    clicker.stop()
    clicker.join(60)
    done.set()
    feeder.join(120)
    clicks.stop()
    cdc.stop()
    sampler.join(30)
    assert clicker.error is None
    produced_clicks, produced_log = clicker.produced, changes[:fed[0]]

    drained = {}
    for pipeline in (clicks, cdc):
        for name, value in pipeline.env.items():
            if name.startswith("DELTAFLOW_"):
                monkeypatch.setenv(name, value)
        began = time.monotonic()
        final = cli(capsys, "run", "--available-now", "--spec", str(pipeline.spec))
        assert final.returncode == 0, final.stderr[-3000:]
        drained[pipeline.name] = round(time.monotonic() - began, 1)

    def table(storage: str, name: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
        path = tmp_path / storage / "tables" / name
        return DeltaTable(str(path)).to_pyarrow_table(columns=columns).to_pylist()

    bronze = table("c", "bronze_clicks", ["topic", "partition", "offset"])
    positions = {(r["topic"], r["partition"], r["offset"]) for r in bronze}
    silver = table("c", "silver_clicks", ["event_id"])
    landed_changes = len(table("d", "bronze_customer_changes", ["offset"]))
    report = {
        "minutes": MINUTES, "clicks_per_second": CLICKS, "changes_per_second": CHANGES,
        "rate_source": f"a quarter of the sustainable rate {SUSTAINABLE:,} events/s, {RATE_SOURCE}",
        "kills": kills,
        "produced": {"clicks": produced_clicks, "customer_changes": len(produced_log)},
        "landed": {"bronze_clicks": len(bronze), "silver_clicks": len(silver),
                   "bronze_customer_changes": landed_changes,
                   "customers": len(table("d", "customers", ["customer_id"])),
                   "customers_audit": len(table("d", "customers_audit", ["customer_id"]))},
        "drain_seconds": drained,
        "memory_mib": {name: [(round(t), round(kib / 1024)) for t, kib in samples]
                       for name, samples in memory.items()},
        "batch_ms_by_5min": {},
        "failed_flows": [],
    }
    for storage, name in (("c", "clickstream"), ("d", "customers_cdc")):
        log = DeltaTable(str(tmp_path / storage / "_event_log")).to_pyarrow_table(
            columns=["flow", "kind", "end_time", "duration_ms", "error"]).to_pylist()
        report["failed_flows"] += [f"{r['flow']} at {r['end_time']}: {r['error']}" for r in log
                                   if r["kind"] == "failed"]
        first = min(r["end_time"] for r in log)
        buckets: dict[str, dict[int, list[int]]] = {}
        for r in log:
            if r["kind"] == "batch":
                minute = int((r["end_time"] - first).total_seconds() // 300) * 5
                buckets.setdefault(r["flow"], {}).setdefault(minute, []).append(r["duration_ms"])
        report["batch_ms_by_5min"][name] = {flow: {m: int(statistics.median(v)) for m, v in sorted(b.items())}
                                           for flow, b in buckets.items()}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "soak.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))

    assert not report["failed_flows"], report["failed_flows"]
    # nothing lost, nothing twice
    assert len(bronze) == len(positions) == produced_clicks
    assert len(silver) == len({r["event_id"] for r in silver})
    assert landed_changes == len(produced_log)
    expected = sorted(scd1(produced_log, "customer_id", COLUMNS).values(), key=lambda r: r["customer_id"])
    assert sorted(table("d", "customers", COLUMNS), key=lambda r: r["customer_id"]) == expected
    history = table("d", "customers_history", [*COLUMNS, "__START_AT", "__END_AT"])
    assert sorted(history, key=lambda r: (r["customer_id"], r["__START_AT"])) == scd2(
        produced_log, "customer_id", COLUMNS)
    audit = table("d", "customers_audit")
    changes_seen = [(r["_commit_version"], r["_change_type"], r["customer_id"]) for r in audit]
    assert len(changes_seen) == len(set(changes_seen))
    assert replay(audit, "customer_id", COLUMNS) == expected
