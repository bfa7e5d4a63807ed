"""The S3 soak: clickstream on the project's S3 server failing a random share of every request, for
``$DELTAFLOW_SOAK_MINUTES`` (30) minutes, SIGKILLed every few minutes (issue 75).

``deltaflow run --continuous`` with every table, checkpoint, lease and event log on ``s3a://``, while a
generator feeds ``$DELTAFLOW_SOAK_CLICKS`` clicks/s (default: an eighth of the clickstream's sustainable
rate on local disk) and the server fails requests at :data:`~deltaflow.dev.s3_faults.DEFAULT_RATES`
(503 SlowDown, 500, connections closed, answers lost, answers late). Every ``KILL_EVERY`` seconds the run is
SIGKILLed and started again; a run that stops by itself must have said why in one line, and is started
again. At the end it stops, the faults end, a last available-now run drains what is left, and:

* every click is in ``bronze_clicks`` once and ``silver_clicks`` holds each event id once;
* ``gold_hourly_product_metrics`` equals its query recomputed from silver (counts, distinct users, sums).

The report (``test-artifacts/soak_s3.json``, printed too) has the events, the kills, the runs that stopped
by themselves and their lines, the faults injected by kind, and the batch durations.

    make soak-s3         # 30 minutes; not part of `make test`
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from deltaflow.dev.s3_faults import DEFAULT_RATES, S3Faults, random_faults
from deltaflow.spec import S3Spec
from deltaflow.storage import StorageLayout
from helpers import cli_env, kill_group, sustainable_rate

MINUTES = float(os.environ.get("DELTAFLOW_SOAK_MINUTES", "30"))
pytestmark = [pytest.mark.soak_s3, pytest.mark.timeout(int(MINUTES * 60) + 1_800)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SUSTAINABLE, RATE_SOURCE = sustainable_rate(8_000)
CLICKS = int(os.environ.get("DELTAFLOW_SOAK_CLICKS", SUSTAINABLE // 8))
KILL_EVERY = max(30.0, min(300.0, MINUTES * 60 / 6))
ARTIFACTS = Path(os.environ.get("DELTAFLOW_TEST_ARTIFACTS", "test-artifacts"))
KINDS = ("503 SlowDown", "500 InternalError", "closed", "answer lost", "late")


def test_soak_on_s3_with_faults(kafka_bootstrap: str, s3_root: str, s3_spec: S3Spec, faults: S3Faults,
                                tmp_path: Path) -> None:
    from deltaflow.dev.generator import EventGenerator
    from deltaflow.dev.topics import create_topic

    create_topic(kafka_bootstrap, "clicks", partitions=3)
    project = tmp_path / "project"
    shutil.copytree(EXAMPLES / "clickstream", project)
    env = {**cli_env(), "DELTAFLOW_KAFKA": kafka_bootstrap, "DELTAFLOW_STORAGE": s3_root,
           "DELTAFLOW_S3_ENDPOINT": str(s3_spec.endpoint), "JDK_JAVA_OPTIONS": ""}
    runs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start() -> subprocess.Popen[bytes]:
        log = tmp_path / f"run-{len(runs)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "deltaflow", "run", "--continuous", "--quiet",
                                     "--spec", str(project)], stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
        runs.append((proc, log))
        return proc

    faults.set(random_faults(DEFAULT_RATES, seed=75))
    clicker = EventGenerator(kafka_bootstrap, "clicks", rate=CLICKS, seed=5)
    clicker.start()
    began = time.monotonic()
    proc = start()
    kills, stopped_by_themselves = 0, []
    next_kill = began + KILL_EVERY
    while time.monotonic() - began < MINUTES * 60:
        time.sleep(1)
        if proc.poll() is not None:  # stopped by a fault outlasting the budget: one line, then again
            output = runs[-1][1].read_text()
            errors = [line for line in output.splitlines() if line.startswith("error:")]
            stopped_by_themselves.append({"exit": proc.returncode, "error": errors})
            assert proc.returncode == 1 and len(errors) == 1 and "Traceback" not in output, output[-4000:]
            proc = start()
        elif time.monotonic() >= next_kill:
            kill_group(proc)
            kills += 1
            next_kill = time.monotonic() + KILL_EVERY
            proc = start()
    clicker.stop()
    clicker.join(60)
    proc.terminate()
    stopped = proc.wait(600)
    hits = faults.hits()
    faults.clear()
    assert clicker.error is None
    drain_began = time.monotonic()
    final = subprocess.run([sys.executable, "-m", "deltaflow", "run", "--available-now", "--quiet", "--spec",
                            str(project)], capture_output=True, text=True, env=env, timeout=1_800)
    drained = time.monotonic() - drain_began
    assert final.returncode == 0, final.stderr[-3000:]

    layout = StorageLayout(s3_root, s3_spec)

    def rows(name: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = layout.open_table(layout.table(name)).to_pyarrow_table(
            columns=columns).to_pylist()
        return found

    bronze = rows("bronze_clicks", ["topic", "partition", "offset"])
    silver = rows("silver_clicks", ["event_id", "user_id", "product_id", "event_timestamp", "revenue"])
    gold = rows("gold_hourly_product_metrics")
    log = layout.open_table(layout.event_log).to_pyarrow_table(
        columns=["flow", "kind", "duration_ms", "error"]).to_pylist()
    batch_ms: dict[str, list[int]] = defaultdict(list)
    for r in log:
        if r["kind"] == "batch":
            batch_ms[r["flow"]].append(r["duration_ms"])
    report = {
        "minutes": MINUTES, "clicks_per_second": CLICKS,
        "rate_source": f"an eighth of the sustainable rate {SUSTAINABLE:,} events/s, {RATE_SOURCE}",
        "fault_rates": dict(zip(KINDS, DEFAULT_RATES, strict=True)),
        "faults_injected": dict(zip(KINDS, hits, strict=True)),
        "kills": kills, "runs": len(runs), "stopped_by_themselves": stopped_by_themselves,
        "last_run_exit_on_sigterm": stopped, "drain_seconds": round(drained, 1),
        "produced": clicker.produced, "bronze_rows": len(bronze), "silver_rows": len(silver),
        "gold_rows": len(gold),
        "batch_ms_median": {f: int(statistics.median(v)) for f, v in batch_ms.items()},
        "batch_ms_p99": {f: int(sorted(v)[int(len(v) * 0.99)]) for f, v in batch_ms.items()},
        "failed_flows": [f"{r['flow']}: {r['error']}" for r in log if r["kind"] == "failed"],
        "ended": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "soak_s3.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))

    assert all(hits), hits
    assert len(bronze) == len({(r["topic"], r["partition"], r["offset"]) for r in bronze}) == clicker.produced
    assert len(silver) == len({r["event_id"] for r in silver})
    assert gold_of(gold) == recomputed(silver)
    assert not report["failed_flows"], report["failed_flows"]


def gold_of(gold: list[dict[str, Any]]) -> dict[tuple[Any, str], tuple[int, int, float]]:
    return {(r["window"]["start"], r["product_id"]): (r["view_count"], r["unique_users"],
                                                      round(r["total_revenue"] or 0.0, 6)) for r in gold}


def recomputed(silver: list[dict[str, Any]]) -> dict[tuple[Any, str], tuple[int, int, float]]:
    """Gold's query over silver: per hour and product, the rows, the distinct users and the revenue."""
    views: Counter[tuple[Any, str]] = Counter()
    users: dict[tuple[Any, str], set[str]] = defaultdict(set)
    revenue: dict[tuple[Any, str], float] = defaultdict(float)
    for r in silver:
        key = (r["event_timestamp"].replace(minute=0, second=0, microsecond=0), r["product_id"])
        views[key] += 1
        if r["user_id"] is not None:
            users[key].add(r["user_id"])
        revenue[key] += r["revenue"] or 0.0
    return {k: (views[k], len(users[k]), round(revenue[k], 6)) for k in views}
