"""`deltaflow status` from event-log rows: state, rates, backlog and the falling-behind warning."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from deltaflow.commands.status import _flow_status

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def batch(i: int, rate_in: float, rate_done: float, behind: int | None = None,
          ago: float = 5.0) -> dict[str, Any]:
    return {"flow": "bronze", "kind": "batch", "batch_id": i, "end_time": NOW - timedelta(seconds=ago),
            "input_rows": 100, "input_rows_per_second": rate_in, "processed_rows_per_second": rate_done,
            "delta_versions_behind": None, "kafka_offsets_behind": behind, "error": None,
            "expectations": '{"_rows": 100, "_dropped": 2, "_quarantined": 3}'}


def test_input_outrunning_processing_is_falling_behind() -> None:
    events = [batch(i, 1_000.0, 600.0, ago=60 - i) for i in range(5)]
    status = _flow_status("bronze", events, NOW)
    assert status.state == "running" and status.falling_behind
    assert (status.last_batch, status.input_rows_per_second) == (4, 1_000.0)
    assert (status.dropped_rows, status.quarantined_rows) == (10, 15)


def test_a_growing_kafka_backlog_is_falling_behind_and_a_shrinking_one_is_not() -> None:
    growing = [batch(i, 500.0, 520.0, behind=1_000 * (i + 1), ago=60 - i) for i in range(4)]
    shrinking = [batch(i, 500.0, 520.0, behind=1_000 * (4 - i), ago=60 - i) for i in range(4)]
    assert _flow_status("bronze", growing, NOW).falling_behind
    assert not _flow_status("bronze", shrinking, NOW).falling_behind
    assert _flow_status("bronze", shrinking, NOW).kafka_offsets_behind == 1_000


def test_states_from_the_last_event() -> None:
    ended = [batch(0, 10.0, 10.0), {**batch(0, 0, 0), "kind": "failed", "batch_id": None, "error": "boom"}]
    assert (_flow_status("f", ended, NOW).state, _flow_status("f", ended, NOW).error) == ("failed", "boom")
    quiet = [batch(0, 10.0, 10.0, ago=600)]
    assert _flow_status("f", quiet, NOW).state == "silent"
    assert not _flow_status("f", [batch(i, 900.0, 100.0, ago=600) for i in range(5)], NOW).falling_behind
