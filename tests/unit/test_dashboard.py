"""The dashboard's state and /metrics from a real event log (written with deltalake); the server's rules."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from deltaflow.observe.dashboard import Dashboard
from deltaflow.runtime.event_log import BatchEvent, EventLog, batch_event, end_event
from deltaflow.spec import load_spec
from deltaflow.storage import StorageLayout

T0 = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
SECRET = "s3cr3t-sasl-password"
GRAPH = {"pipeline": "shop", "trigger": "continuous", "datasets": [
    {"dataset": "bronze", "kind": "table", "stored": True, "location": "transformations/defs.py:4",
     "flows": [{"flow": "bronze", "location": "transformations/defs.py:4", "inputs": {},
                "sources": ["kafka:orders"]}]},
    {"dataset": "silver", "kind": "table", "stored": True, "location": "transformations/defs.py:9",
     "flows": [{"flow": "silver", "location": "transformations/defs.py:9", "inputs": {"bronze": "stream"},
                "sources": [], "quarantines": True}]},
    {"dataset": "gold", "kind": "materialized_view", "stored": True, "location": "transformations/defs.py:15",
     "flows": [{"flow": "gold", "location": "transformations/defs.py:15", "inputs": {"silver": "batch"},
                "sources": []}]},
]}


def progress(flow: str, batch: int, rows: int, at: datetime, duration_ms: int = 400,
             expectations: dict[str, int] | None = None) -> dict[str, Any]:
    return {"name": flow, "id": f"q-{flow}", "batchId": batch, "numInputRows": rows,
            "timestamp": at.isoformat().replace("+00:00", "Z"),
            "durationMs": {"triggerExecution": duration_ms, "addBatch": duration_ms - 50, "walCommit": 20},
            "sources": [{"description": "KafkaV2[Subscribe[orders]]",
                         "metrics": {"maxOffsetsBehindLatest": "7"}}],
            "observedMetrics": {"deltaflow_expectations": expectations} if expectations else {}}


def ended(event: BatchEvent, at: datetime) -> BatchEvent:
    return replace(event, start_time=at, end_time=at)


def write_log(layout: StorageLayout, batches: int = 20) -> None:
    """Two runs: an available-now run that completed, then (2 h later) a continuous one; silver failed."""
    first = EventLog(layout.event_log, "shop", run_id="run-1", trigger="available-now")
    earlier = T0 - timedelta(hours=2)
    first.add(batch_event("shop", "run-1", progress("bronze", 0, 500, earlier)))
    first.add(ended(end_event("shop", "run-1", "bronze", "completed", None), earlier + timedelta(seconds=1)))
    first.close()
    second = EventLog(layout.event_log, "shop", run_id="run-2", trigger="continuous")
    start = T0 + timedelta(minutes=5)
    for i in range(batches):
        at = start + timedelta(seconds=2 * i)
        second.add(batch_event("shop", "run-2", progress("bronze", i + 1, 100 + i, at)))
        checks = {"_rows": 100, "_dropped": 1, "_quarantined": 2, "positive": 3, "known_customer": i % 2}
        second.add(batch_event("shop", "run-2", progress("silver", i, 100, at + timedelta(seconds=1),
                                                         expectations=checks)))
    failure = end_event("shop", "run-2", "silver", "failed", "expectation 'positive' failed in flow 'silver'")
    second.add(ended(failure, start + timedelta(seconds=2 * batches)))
    held = end_event("shop", "run-2", "gold", "skipped", "upstream 'silver' failed")  # rule 13
    second.add(ended(held, start + timedelta(seconds=2 * batches + 1)))
    second.close()
    assert first.error is None and second.error is None


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Dashboard, StorageLayout]:
    monkeypatch.setenv("SHOP_KAFKA_PASSWORD", SECRET)
    (tmp_path / "deltaflow.yml").write_text(
        "name: shop\nstorage: ./storage\nlibraries: [transformations/*.py]\n"
        "kafka:\n  bootstrap_servers: 127.0.0.1:1\n"  # nothing listens: backlogs fall back to the log's
        "  options: {security.protocol: SASL_PLAINTEXT, sasl.password: '${SHOP_KAFKA_PASSWORD}'}\n")
    spec = load_spec(tmp_path / "deltaflow.yml")
    layout = StorageLayout.of(spec)
    write_log(layout)
    layout.fs.write_text(layout.graph_record, json.dumps(GRAPH))
    write_deltalake(layout.quarantine("silver"), pa.table({
        "flow": ["silver"] * 2, "batch_id": [3, 4], "quarantined_at": [T0, T0 + timedelta(seconds=2)],
        "failed_expectations": [["positive"], ["positive"]], "record": ['{"a": -1}', '{"a": -2}'],
        "topic": ["orders"] * 2, "partition": [0, 1], "offset": [12, 40], "source_file": [None, None]}))
    board = Dashboard(spec, layout)
    yield board, layout
    board.close()


def test_state_shows_each_flow_its_errors_quality_and_runs(shop: tuple[Dashboard, StorageLayout]) -> None:
    board, _ = shop
    state = board.state(now=T0 + timedelta(minutes=6))
    flows = {f["flow"]: f for f in state["flows"]}
    assert flows["bronze"]["rows_total"] == 500 + sum(100 + i for i in range(20))
    assert flows["bronze"]["state"] == "running" and flows["bronze"]["last_batch"] == 20
    assert flows["bronze"]["backlog"] == {"kafka_offsets": 7, "delta_versions": None,
                                          "measured": "last batch"}
    assert flows["bronze"]["last_durations_ms"]["addBatch"] == 350
    assert flows["silver"]["state"] == "failed"
    assert flows["silver"]["location"] == "transformations/defs.py:9"
    assert "positive" in (flows["silver"]["error"] or "")
    nodes = {n["id"]: n for n in state["graph"]["nodes"]}
    assert set(nodes) == {"kafka:orders", "bronze", "silver", "gold", "silver_quarantine"}
    assert (nodes["kafka:orders"]["column"], nodes["bronze"]["column"], nodes["gold"]["column"]) == (0, 1, 3)
    quarantine = nodes["silver_quarantine"]
    assert (quarantine["kind"], quarantine["column"], quarantine["rows"]) == ("quarantine", 3, 2)
    edge = {"from": "silver", "to": "silver_quarantine", "label": "quarantined rows"}
    assert edge in state["graph"]["edges"]
    assert (nodes["silver"]["state"], nodes["bronze"]["state"], nodes["gold"]["state"]) == \
        ("failed", "running", "skipped")
    assert (flows["gold"]["state"], flows["gold"]["error"]) == ("skipped", "upstream 'silver' failed")
    assert {"from": "bronze", "to": "silver", "label": "stream"} in state["graph"]["edges"]
    quality = {q["table"]: q for q in state["quality"]}["silver"]
    assert {e["name"]: e["failed"] for e in quality["expectations"]} == {"known_customer": 10, "positive": 60}
    assert (quality["dropped"], quality["quarantined"]) == (20, 40)
    assert sum(quality["series"]["failed"]["positive"]) == 60
    runs = state["runs"]
    assert [(r["run_id"], r["trigger"], r["outcome"]) for r in runs] == [
        ("run-2", "continuous", "failed"), ("run-1", "available-now", "completed")]
    assert runs[0]["batches"] == 40 and runs[1]["rows"] == 500
    assert runs[0]["rows"] == sum(100 + i for i in range(20))  # what bronze took in, not silver's too
    assert state["errors"][0]["flow"] == "silver"
    assert state["errors"][0]["location"] == "transformations/defs.py:9"
    series = flows["bronze"]["series"]
    assert sum(series["rows"]) == flows["bronze"]["rows_total"] - 500  # the last hour before its last batch
    assert series["bucket_seconds"] == [5.0]


def test_metrics_equal_the_event_log(shop: tuple[Dashboard, StorageLayout]) -> None:
    from deltalake import DeltaTable
    from prometheus_client.parser import text_string_to_metric_families

    from deltaflow.ui.metrics import render

    board, layout = shop
    state, events = board.snapshot()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(render(state, events).decode())
               for s in family.samples}

    def metric(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted({"pipeline": "shop", **labels}.items())))]

    log = DeltaTable(layout.event_log).to_pyarrow_table().to_pylist()  # read on its own
    for flow in ("bronze", "silver"):
        batches = [r for r in log if r["flow"] == flow and r["kind"] == "batch"]
        assert metric("deltaflow_flow_batches_total", flow=flow) == len(batches)
        assert metric("deltaflow_flow_input_rows_total", flow=flow) == sum(r["input_rows"] for r in batches)
        assert metric("deltaflow_flow_batch_duration_seconds_count", flow=flow) == len(batches)
        assert metric("deltaflow_flow_batch_duration_seconds_sum", flow=flow) == pytest.approx(
            sum(r["duration_ms"] for r in batches) / 1000)
    checks = [json.loads(r["expectations"]) for r in log if r["expectations"]]
    assert metric("deltaflow_flow_quarantined_rows_total", flow="silver") == \
        sum(c["_quarantined"] for c in checks)
    assert metric("deltaflow_flow_dropped_rows_total", flow="silver") == sum(c["_dropped"] for c in checks)
    assert metric("deltaflow_expectation_failed_rows_total", flow="silver", expectation="positive") == \
        sum(c["positive"] for c in checks)
    assert metric("deltaflow_flow_state", flow="silver", state="failed") == 1
    assert metric("deltaflow_flow_state", flow="silver", state="running") == 0
    assert metric("deltaflow_flow_state", flow="gold", state="skipped") == 1
    assert metric("deltaflow_flow_backlog_kafka_offsets", flow="bronze") == 7
    assert metric("deltaflow_table_rows", table="silver_quarantine") == 2


def test_the_server_is_read_only_on_loopback_keeps_to_its_folder_and_shows_no_secret(
        shop: tuple[Dashboard, StorageLayout]) -> None:
    from deltaflow.ui.app import UiServer

    board, layout = shop
    server = UiServer(board.spec, layout, port=0).start()
    try:
        assert server.host == "127.0.0.1" and server.url.startswith("http://127.0.0.1:")

        def get(path: str, method: str = "GET") -> tuple[int, str]:
            try:
                with urllib.request.urlopen(urllib.request.Request(server.url + path, method=method)) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as exc:
                return exc.code, ""

        bodies = [get(p) for p in ("", "api/state", "metrics", "static/app.js")]
        assert [status for status, _ in bodies] == [200, 200, 200, 200]
        assert all(SECRET not in body and "127.0.0.1:1" not in body for _, body in bodies)
        assert json.loads(bodies[1][1])["pipeline"] == "shop"
        for outside in ("static/../deltaflow.yml", "static/%2e%2e/%2e%2e/deltaflow.yml",
                        "static/..%2f..%2fdeltaflow.yml", "api/state/../../deltaflow.yml"):
            status, body = get(outside)
            assert status == 404 and "storage" not in body
        assert get("api/state", method="POST")[0] == 405
        assert get("metrics", method="DELETE")[0] == 405
    finally:
        server.stop()


def test_a_page_left_open_does_not_hold_the_server_up(shop: tuple[Dashboard, StorageLayout]) -> None:
    """A browser keeps its event stream open: the server still stops (uvicorn waits for open responses)."""
    from deltaflow.ui.app import UiServer

    board, layout = shop
    server = UiServer(board.spec, layout, port=0).start()
    with urllib.request.urlopen(server.url + "api/events") as stream:
        assert stream.readline().startswith(b"data: {")  # the stream is open, its first state sent
        server.stop()
        assert not server._thread.is_alive(), "the server was still serving the open stream"


def test_ten_thousand_batches_make_one_state(tmp_path: Path) -> None:
    """The figures stay exact at 10,000 batches (the latency is measured by benchmarks/ui_latency.py)."""
    from deltaflow.dev.sample_log import write_batches

    (tmp_path / "deltaflow.yml").write_text("name: bench\nstorage: ./storage\nlibraries: [t/*.py]\n")
    spec = load_spec(tmp_path / "deltaflow.yml")
    layout = StorageLayout.of(spec)
    write_batches(layout, batches=10_000, appends=20)
    board = Dashboard(spec, layout)
    state = board.state()
    flows = {f["flow"]: f for f in state["flows"]}
    assert sum(f["last_batch"] + 1 for f in flows.values()) == 10_000
    assert all(len(f["series"]["t"]) <= 200 for f in flows.values())
    board.close()



def test_backlog_measured_while_watching_wins_over_the_logged_one() -> None:
    from deltaflow.observe.series import flow_series

    batches = [{"end_time": T0 + timedelta(seconds=10 * i), "input_rows": 100, "duration_ms": 1_000,
                "kafka_offsets_behind": 0, "delta_versions_behind": None} for i in range(4)]
    samples = [((T0 + timedelta(seconds=21)).timestamp(), 4_200, None)]
    series = flow_series(batches, samples)
    assert series["bucket_seconds"] == [5.0]
    assert series["kafka_offsets_behind"] == [0, None, 0, None, 4_200, None, 0]
    assert series["input_rps"][:3] == [20.0, 0.0, 20.0] and series["processed_rps"][0] == 100.0


def test_the_event_log_keeps_its_own_delta_log_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Weeks of appends (one a second) must not leave every commit file for each reader to replay."""
    from deltaflow.dev.sample_log import write_batches
    from deltaflow.runtime import event_log

    monkeypatch.setattr(event_log, "LOG_RETENTION", "interval 0 seconds")  # production: an hour
    (tmp_path / "deltaflow.yml").write_text("name: bench\nstorage: ./storage\nlibraries: [t/*.py]\n")
    spec = load_spec(tmp_path / "deltaflow.yml")
    layout = StorageLayout.of(spec)
    write_batches(layout, batches=750, appends=250)
    delta_log = Path(layout.event_log) / "_delta_log"
    commits = sorted(delta_log.glob("*.json"))
    assert (delta_log / "_last_checkpoint").exists() and list(delta_log.glob("*.checkpoint.parquet"))
    assert len(commits) < 60, len(commits)  # 250 appends, their compactions, a checkpoint every 100
    assert layout.open_table(layout.event_log).to_pyarrow_table().num_rows == 750
    flows = {f["flow"]: f for f in Dashboard(spec, layout).state()["flows"]}
    assert sum(f["last_batch"] + 1 for f in flows.values()) == 750
