"""`deltaflow status` from event-log rows: state, rates over a window, backlog, the falling-behind warning."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from deltaflow.commands.status import MIN_WINDOW_SECONDS, WINDOW_SECONDS, flow_status, window_rates
from deltaflow.observe.backlog import Backlog

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def batch(i: int, rows: int = 100, duration_ms: int = 500, behind: int | None = None,
          ago: float = 5.0) -> dict[str, Any]:
    end = NOW - timedelta(seconds=ago)
    return {"flow": "bronze", "kind": "batch", "batch_id": i,
            "start_time": end - timedelta(milliseconds=duration_ms), "end_time": end,
            "input_rows": rows, "duration_ms": duration_ms,
            "delta_versions_behind": None, "kafka_offsets_behind": behind, "error": None, "sources": "[]",
            "expectations": '{"_rows": 100, "_dropped": 2, "_quarantined": 3}'}


def test_rates_are_over_the_window_and_say_so() -> None:
    events = [batch(i, rows=1_000, duration_ms=250, ago=40 - 10 * i) for i in range(4)]  # a batch every 10 s
    status = flow_status("bronze", events, NOW)
    assert status.state == "running"
    # 4,000 rows from the first batch's start (40.25 s ago) to now; 1 s spent in batches
    assert status.rate_window_seconds is not None and abs(status.rate_window_seconds - 40.25) < 1e-6
    assert status.input_rows_per_second is not None
    assert abs(status.input_rows_per_second - 4_000 / 40.25) < 1e-6
    assert status.processed_rows_per_second == 4_000.0
    assert (status.rows_total, status.dropped_rows, status.quarantined_rows) == (4_000, 8, 12)
    old = batch(9, rows=1_000_000, ago=WINDOW_SECONDS + 30)  # outside the window: not counted
    assert flow_status("bronze", [old, *events], NOW).input_rows_per_second == status.input_rows_per_second


def test_a_burst_over_milliseconds_has_no_rate() -> None:
    """The 679,021 rows/s of a gold batch over a few ms: no window that short makes a rate."""
    burst = [batch(0, rows=6_790, duration_ms=10, ago=600)]
    done = {**batch(0, ago=599.9), "kind": "completed", "batch_id": None}
    status = flow_status("gold", [*burst, done], NOW)
    assert status.state == "completed"
    assert (status.input_rows_per_second, status.rate_window_seconds) == (None, None)
    assert window_rates(burst, burst[0]["end_time"])[2] is None
    assert MIN_WINDOW_SECONDS > 0.01


def test_backlog_now_wins_over_the_last_batch() -> None:
    events = [batch(0, behind=0, ago=30), {**batch(0), "kind": "stopped", "batch_id": None}]
    stale = flow_status("bronze", events, NOW)
    assert (stale.kafka_offsets_behind, stale.backlog_measured) == (0, "last batch")
    now = flow_status("bronze", events, NOW, Backlog(kafka_offsets=8_092))
    assert (now.kafka_offsets_behind, now.backlog_measured) == (8_092, "now")


def test_a_growing_kafka_backlog_is_falling_behind_and_a_shrinking_one_is_not() -> None:
    growing = [batch(i, behind=1_000 * (i + 1), ago=60 - i) for i in range(4)]
    shrinking = [batch(i, behind=1_000 * (4 - i), ago=60 - i) for i in range(4)]
    assert flow_status("bronze", growing, NOW).falling_behind
    assert not flow_status("bronze", shrinking, NOW).falling_behind
    assert flow_status("bronze", shrinking, NOW).kafka_offsets_behind == 1_000


def test_a_kafka_backlog_of_several_batches_of_input_is_falling_behind() -> None:
    # 6 batches of 1,000 rows, 5 s each, back to back (a 0-second trigger is always busy): 200 rows/s in
    steady = [batch(i, rows=1_000, duration_ms=5_000, ago=5 * (5 - i)) for i in range(6)]
    assert not flow_status("bronze", steady, NOW, Backlog(kafka_offsets=1_000)).falling_behind  # one batch's
    assert flow_status("bronze", steady, NOW, Backlog(kafka_offsets=50_000)).falling_behind
    logged_only = [{**b, "kafka_offsets_behind": 50_000} for b in steady]  # a stale figure says nothing
    assert not flow_status("bronze", logged_only[-1:], NOW).falling_behind


def test_states_from_the_last_event() -> None:
    ended = [batch(0), {**batch(0), "kind": "failed", "batch_id": None, "error": "boom"}]
    assert (flow_status("f", ended, NOW).state, flow_status("f", ended, NOW).error) == ("failed", "boom")
    held = [batch(0), {**batch(0), "kind": "skipped", "batch_id": None, "error": "upstream 'silver' failed"}]
    assert (flow_status("f", held, NOW).state, flow_status("f", held, NOW).error) == (
        "skipped", "upstream 'silver' failed")
    assert flow_status("f", [batch(0, ago=600)], NOW).state == "silent"
    assert not flow_status("f", [batch(i, ago=600 - i) for i in range(5)], NOW).falling_behind


def test_the_table_fits_an_80_column_terminal_and_what_needs_a_look_is_below_it_whole() -> None:
    from rich.console import Console

    from deltaflow.cli.views import status_notes, status_table

    kafka = [batch(i, rows=123_456, behind=1_200) for i in range(5)]
    error = "PythonException: ValueError: negative n, at transformations/defs.py:21 in the batch function"
    failed = {**batch(5), "kind": "failed", "batch_id": None, "error": error}
    flows = [flow_status("bronze_clicks_from_kafka", kafka, NOW),
             flow_status("silver", [*kafka, failed], NOW)]
    console = Console(width=80, record=True)
    console.print(status_table(flows))
    lines = console.export_text().splitlines()
    assert all(len(line.rstrip()) <= 80 for line in lines)
    assert any(line.startswith("bronze_clicks_from_kafka  running ") for line in lines), lines
    assert any(line.startswith("silver  ") and " failed " in line and " 617,280 " in line for line in lines)
    assert "…" not in "".join(lines)  # nothing cut: long cells wrap instead
    assert status_notes(flows[0]) == "15 quarantined, 10 dropped"
    assert status_notes(flows[1]) == f"15 quarantined, 10 dropped; {error}"
