"""The dashboard as a person sees it: a pipeline over the real broker, the page in headless Chromium.

The page must show every dataset, its processed-rows figure must rise as batches commit, a quarantined
record must appear among the samples, and a failing flow must turn red with its error; afterwards
``/metrics`` equals the event log and ``status`` gives the backlog as it is now. A screenshot of the page
goes to ``$DELTAFLOW_TEST_ARTIFACTS`` (default ``test-artifacts/``).
"""

from __future__ import annotations

import json
import os
import threading
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from helpers import Project

DEFS = """
import deltaflow as dp

@dp.table
def bronze():
    return dp.read_kafka("{topic}")

@dp.table
@dp.expect_or_quarantine("has_amount", "amount IS NOT NULL")
def silver():
    return dp.parse_json(spark.readStream.table("bronze"), "order_id STRING, amount DOUBLE",
                         required=["order_id"])

@dp.table
@dp.expect_or_fail("not_huge", "amount < 1000000")
def gold():
    return spark.readStream.table("silver")
"""
ARTIFACTS = Path(os.environ.get("DELTAFLOW_TEST_ARTIFACTS", "test-artifacts"))
WAIT = 90  # seconds: a batch on two busy cores, then the page's next update


def orders(start: int, count: int) -> list[dict[str, Any]]:
    return [{"order_id": f"o{i}", "amount": float(i % 90 + 1)} for i in range(start, start + count)]


def test_the_page_follows_a_running_pipeline(  # type: ignore[no-untyped-def]
        spark, kafka_bootstrap: str, tmp_path: Path, browser: Any) -> None:
    from deltalake import DeltaTable
    from prometheus_client.parser import text_string_to_metric_families
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from deltaflow.commands.status import pipeline_status
    from deltaflow.dev.generator import produce
    from deltaflow.dev.topics import create_topic

    topic = f"ui-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, partitions=2)
    project = Project(tmp_path / "p", DEFS.format(topic=topic), bootstrap=kafka_bootstrap)
    pipeline = project.pipeline(spark)
    produce(kafka_bootstrap, topic, orders(0, 50))
    run = pipeline.start("continuous", "1 second")
    server = pipeline.serve_ui(port=0)
    stop = threading.Event()
    watcher = threading.Thread(target=lambda: run.wait(stop), daemon=True)  # reports batches, logs ends
    watcher.start()
    try:
        browser.get(server.url)
        wait = WebDriverWait(browser, WAIT, poll_frequency=0.5)

        def node_state(node: str) -> str | None:
            found = browser.find_elements(By.CSS_SELECTOR, f'[data-node="{node}"]')
            return found[0].get_attribute("data-state") if found else None

        def rows(flow: str) -> int:
            found = f'tr[data-flow="{flow}"] [data-field="rows_total"]'
            cells = browser.find_elements(By.CSS_SELECTOR, found)
            return int(cells[0].text.replace(",", "")) if cells and cells[0].text.strip() else -1

        # every dataset and the topic are drawn, each dataset running
        wait.until(lambda _: all(node_state(n) == "running" for n in ("bronze", "silver", "gold")))
        assert browser.find_elements(By.CSS_SELECTOR, f'[data-node="kafka:{topic}"]')
        wait.until(lambda _: rows("bronze") >= 50)
        first = rows("bronze")

        # the processed-rows figure rises as new batches commit, without reloading the page
        marker = browser.execute_script("window.__same_page = true; return true")
        produce(kafka_bootstrap, topic, orders(50, 70))
        wait.until(lambda _: rows("bronze") >= first + 70)
        assert marker and browser.execute_script("return window.__same_page === true")

        # a record that is not JSON is quarantined, and shown among the samples
        produce(kafka_bootstrap, topic, [b"{not json <b>at all</b>"])
        wait.until(lambda _: any("not json" in r.text for r in
                                 browser.find_elements(By.CSS_SELECTOR, 'tr[data-sample="silver"]')))

        # a flow that fails turns red, with its error and its definition's line, while the others run
        produce(kafka_bootstrap, topic, [{"order_id": "huge", "amount": 5e6}])
        wait.until(lambda _: node_state("gold") == "failed")
        error = browser.find_element(By.CSS_SELECTOR, '[data-error="gold"]').text
        assert "not_huge" in error and "defs.py:" in error
        assert node_state("bronze") == "running"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / "dashboard.png"))
        severe = [e for e in browser.get_log("browser") if "api/events" not in e.get("message", "")]
        assert not severe, severe

        stop.set()
        watcher.join(timeout=180)
        metrics_text = urllib.request.urlopen(server.url + "metrics").read().decode()
    finally:
        stop.set()
        server.stop()

    # nothing lost, nothing duplicated: 120 orders, one quarantined record
    expected = sorted([*(o["order_id"] for o in orders(0, 120)), "huge"])
    assert sorted(r["order_id"] for r in project.rows("silver")) == expected
    assert len(project.rows("silver_quarantine")) == 1

    # /metrics, parsed, equals the event log read on its own
    samples = {(s.name, s.labels.get("flow")): s.value
               for family in text_string_to_metric_families(metrics_text) for s in family.samples
               if "expectation" not in s.labels and "state" not in s.labels}
    log = [r for r in DeltaTable(project.layout.event_log).to_pyarrow_table().to_pylist()
           if r["kind"] == "batch"]
    for flow in ("bronze", "silver", "gold"):
        batches = [r for r in log if r["flow"] == flow]
        assert samples[("deltaflow_flow_batches_total", flow)] == len(batches)
        assert samples[("deltaflow_flow_input_rows_total", flow)] == sum(r["input_rows"] for r in batches)
    checks = [json.loads(r["expectations"]) for r in log if r["flow"] == "silver" and r["expectations"]]
    quarantined = sum(c["_quarantined"] for c in checks)
    assert samples[("deltaflow_flow_quarantined_rows_total", "silver")] == quarantined == 1

    # once stopped, the backlog is the one now, not the one the last batch saw
    produce(kafka_bootstrap, topic, orders(500, 30))
    bronze = next(f for f in pipeline_status(pipeline.spec, project.layout) if f.flow == "bronze")
    assert (bronze.state, bronze.kafka_offsets_behind, bronze.backlog_measured) == ("stopped", 30, "now")


ONE_RUN = """
import deltaflow as dp

@dp.table
def bronze():
    return dp.read_files("landing", format="json", schema="order_id STRING, amount DOUBLE")

@dp.table
@dp.expect_or_quarantine("positive", "amount > 0")
def silver():
    return spark.readStream.table("bronze")
"""


def test_after_one_run_the_charts_span_that_run_and_the_quarantine_is_drawn(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, browser: Any) -> None:
    """Issue 40, problem 5: one batch per flow once spanned years; quarantine tables were not drawn."""
    from datetime import UTC, datetime

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    project = Project(tmp_path / "p", ONE_RUN)
    project.drop("0.json", [{"order_id": f"o{i}", "amount": float(i - 2)} for i in range(10)])
    project.run(spark)
    server = project.pipeline(spark).serve_ui(port=0)
    try:
        browser.get(server.url)
        wait = WebDriverWait(browser, WAIT, poll_frequency=0.5)
        host = wait.until(lambda b: next((e for e in b.find_elements(By.ID, "chart-rates")
                                          if e.get_attribute("data-x-max")), None))
        low, high = float(host.get_attribute("data-x-min")), float(host.get_attribute("data-x-max"))
        now = datetime.now(UTC).timestamp()
        assert 60 <= high - low <= 3_600, (low, high)  # minutes around the run, not years
        assert low <= now + 60 and high >= now - 3_600, (low, high, now)
        nodes = wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, '[data-node="silver_quarantine"]'))
        assert "quarantine" in nodes[0].text and "3 rows" in nodes[0].text, nodes[0].text
        run = wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "tr[data-run]"))[0]
        assert run.find_elements(By.CSS_SELECTOR, "td.num")[1].text == "10"  # taken in, not bronze + silver
    finally:
        server.stop()
    assert len(project.rows("silver_quarantine")) == 3 and len(project.rows("silver")) == 7
