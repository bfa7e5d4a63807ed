"""What a new user's terminal shows (issue 77): help, piped output, counters, graph and status before a run.

Each test runs the command line in this process on a project ``deltaflow init`` wrote, with no JVM allowed
(``no_jvm``), and reads what it printed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path

import pytest

from deltaflow.cli.progress import FlowTotals, format_batch
from deltaflow.commands.init import init_project
from deltaflow.observe.graph_picture import picture
from deltaflow.pipeline import Pipeline
from deltaflow.runtime.outcomes import BatchProgress
from helpers import SparkStarted, cli


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    folder = tmp_path / "shop"
    init_project(folder)
    return folder


@pytest.mark.parametrize("verb", ["", "run", "show", "quarantine", "kafka start", "vacuum"])
def test_help_shows_no_type_placeholders_and_usage_names_the_arguments(
        verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    shown = cli(capsys, *verb.split(), "--help")
    assert shown.returncode == 0
    assert not re.search(r"<(bool|str|int|int range|path)>", shown.stdout), shown.stdout
    if verb == "quarantine":
        assert "Usage: deltaflow quarantine [OPTIONS] [replay] TABLE\n" in re.sub(r" +\n", "\n", shown.stdout)
        assert "replay_table" not in shown.stdout
    if verb == "show":
        assert "--limit" in shown.stdout and re.search(r"--limit +N ", shown.stdout)


def test_the_verbs_are_listed_in_the_order_of_work(capsys: pytest.CaptureFixture[str]) -> None:
    shown = cli(capsys, "--help").stdout
    panels = re.findall(r"╭─ (.+?) ─", shown)
    assert panels[1:] == ["Build and run", "Look at the pipeline and its tables", "Maintenance",
                          "Local servers (development, tests)", "Setup"]
    verbs = re.findall(r"^│ ([a-z-]+) ", shown, re.MULTILINE)
    assert verbs.index("init") < verbs.index("run") < verbs.index("status") < verbs.index("optimize")


def test_piped_output_is_not_wrapped(shop: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from deltaflow.cli.shared import console

    monkeypatch.setenv("COLUMNS", "80")
    line = format_batch(BatchProgress("a_flow_with_a_rather_long_name_" * 3, 12, 123_456, 4_000.0, 9_000.0,
                                      1_234, written=120_000, quarantined=3_456))
    console().print(line, markup=False)
    assert capsys.readouterr().out == line + "\n"


def test_a_batch_line_says_what_was_read_written_and_set_aside() -> None:
    progress = {"batchId": 0, "numInputRows": 6, "inputRowsPerSecond": 0.4, "processedRowsPerSecond": 1.0,
                "durationMs": {"triggerExecution": 5956},
                "observedMetrics": {"deltaflow_expectations": {"_rows": 5, "_dropped": 0, "_quarantined": 1,
                                                               "has_user": 1}},
                "stateOperators": [{"customMetrics": {"numDroppedDuplicateRows": 1}}]}
    batch = BatchProgress.of("silver_events", progress)
    assert format_batch(batch) == ("silver_events  batch 0  read 6 rows  wrote 4  quarantined 1  "
                                   "1 duplicate dropped  5,956 ms")  # no rate over six rows
    carried = BatchProgress.of("bronze_events", progress, shared=True)
    assert format_batch(carried) == "bronze_events  batch 0  read 6 rows  5,956 ms"
    totals = FlowTotals()
    totals.add(batch)
    totals.add(BatchProgress.of("silver_events", {**progress, "batchId": 1}))
    assert totals.summary() == "read 12 rows, wrote 8, quarantined 2, 2 duplicates dropped this run"
    view = FlowTotals()
    view.add(BatchProgress.of_refresh("gold", 10, {"mode": "full", "rows_written": 1}))
    assert view.summary() == "refreshed once this run, 1 row written"


def test_status_of_a_pipeline_that_never_ran_lists_its_flows(
        shop: Path, capsys: pytest.CaptureFixture[str], no_jvm: None) -> None:
    shown = cli(capsys, "status", "--spec", str(shop))
    assert shown.returncode == 0, shown.stderr
    rows = {line.split()[0]: line for line in shown.stdout.splitlines()[2:] if line.strip()}
    assert set(rows) == {"bronze_events", "silver_events", "gold_actions"}
    assert all(" not run yet " in row for row in rows.values()), shown.stdout
    as_json = cli(capsys, "status", "--json", "--spec", str(shop))
    assert {json.loads(line)["state"] for line in as_json.stdout.splitlines()} == {"not run yet"}
    quarantine = cli(capsys, "quarantine", "silver_events", "--spec", str(shop))
    assert quarantine.returncode == 0, quarantine.stderr
    assert quarantine.stdout == "silver_events: its quarantine is still empty (no row has failed its rules)\n"
    none = cli(capsys, "quarantine", "bronze_events", "--spec", str(shop))
    assert none.returncode == 1 and "table 'bronze_events' has no quarantine" in none.stderr


def test_graph_draws_the_last_runs_graph_without_spark_until_a_definition_changes(
        shop: Path, capsys: pytest.CaptureFixture[str], no_jvm: None) -> None:
    pipeline = Pipeline.load(shop)
    recorded = {"datasets": [
        {"dataset": "bronze_events", "kind": "table", "stored": True, "location": "pipeline.py:14",
         "label": "streaming table", "flows": [],
         "edges": [{"from": "files:landing", "via": "", "dataset": False}]},
        {"dataset": "silver_events", "kind": "table", "stored": True, "location": "pipeline.py:21",
         "label": "streaming table", "flows": [],
         "edges": [{"from": "bronze_events", "via": "stream", "dataset": True}]}]}
    assert picture(recorded) is recorded
    pipeline.layout.fs.write_text(pipeline.layout.graph_record,
                                  json.dumps({**recorded, "fingerprint": pipeline.fingerprint()}))
    drawn = cli(capsys, "graph", "--spec", str(shop))
    assert drawn.returncode == 0 and drawn.stderr == ""
    assert drawn.stdout.splitlines() == [
        "bronze_events  streaming table  pipeline.py:14", "  <- files:landing",
        "silver_events  streaming table  pipeline.py:21", "  <- bronze_events (stream)"]
    mermaid = cli(capsys, "graph", "--format", "mermaid", "--spec", str(shop)).stdout
    assert "bronze_events -->|stream| silver_events" in mermaid
    definitions = shop / "transformations" / "pipeline.py"
    definitions.write_text(definitions.read_text() + "\n# changed\n")
    with pytest.raises(SparkStarted):  # the definitions changed: they are resolved again, on Spark
        cli(capsys, "graph", "--spec", str(shop))
    assert "graph: the definitions changed since the last run" in capsys.readouterr().err


def test_a_dashboard_port_in_use_is_deltaflows_one_line(
        shop: Path, capsys: pytest.CaptureFixture[str], no_jvm: None) -> None:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        shown = cli(capsys, "ui", "--port", str(port), "--spec", str(shop))
    assert shown.returncode == 1
    assert shown.stderr.splitlines() == [f"error: DF-CONFIG the dashboard cannot listen on 127.0.0.1:{port}: "
                                         "address already in use (pick another port with --port)"]


@pytest.mark.parametrize("verb", [["dry-run"], ["graph"], ["optimize"], ["run"]])  # each starts Spark here
def test_every_verb_starts_spark_with_its_output_in_a_run_log_not_on_the_terminal(
        shop: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        verb: list[str]) -> None:
    """Spark's banner is what its JVM prints at launch: a JVM launched inside a run log prints it there."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from deltaflow.runtime.run_log import LOG_VARIABLE

    seen: list[str | None] = []

    def launch(cls: type, *args: object, **kwargs: object) -> None:
        seen.append(os.environ.get(LOG_VARIABLE))
        raise SparkStarted("Spark was started")

    monkeypatch.setattr(SparkContext, "_ensure_initialized", classmethod(launch))
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    monkeypatch.setattr(SparkSession, "_instantiatedSession", None)
    monkeypatch.setattr(SparkSession, "_activeSession", None)
    monkeypatch.delenv("DELTAFLOW_LOG_LEVEL", raising=False)
    with contextlib.suppress(SparkStarted):
        cli(capsys, *verb, "--spec", str(shop))
    assert seen, f"{verb[0]} did not start Spark"
    assert seen[0] is not None, f"{verb[0]} started Spark outside a run log: its banner goes to the terminal"
