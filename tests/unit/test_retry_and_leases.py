"""The storage retry policy (a time budget, not a count) and the lease rules that do not need a server: a
renewal that meets this run's own earlier write still holds, one that meets another run's names it, and a
hold is judged by the time since its last successful renewal."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from deltaflow.errors import StorageError
from deltaflow.storage import StorageLayout
from deltaflow.storage.lease import TableLeases
from deltaflow.storage.retry import RetryPolicy, retryable


class Throttled(Exception):
    response: ClassVar[dict[str, Any]] = {"Error": {"Code": "SlowDown"},
                                          "ResponseMetadata": {"HTTPStatusCode": 503}}


class Denied(Exception):
    response: ClassVar[dict[str, Any]] = {"Error": {"Code": "AccessDenied"},
                                          "ResponseMetadata": {"HTTPStatusCode": 403}}


def test_a_call_is_tried_again_until_the_budget_is_spent_then_one_line_names_it() -> None:
    waits: list[float] = []
    policy = RetryPolicy(budget_seconds=1.0, base_seconds=0.01, cap_seconds=0.05, sleep=waits.append)
    tries = []

    def throttled() -> None:
        tries.append(time.monotonic())
        time.sleep(0.02)
        raise Throttled("An error occurred (SlowDown)")

    with pytest.raises(StorageError) as failed:
        policy.run("GetObject", "s3a://lake/p/x", throttled)
    line = str(failed.value)
    assert tries[-1] - tries[0] > 0.8, "gave up before the budget was spent"
    assert len(tries) > 10 and len(waits) == len(tries) - 1  # a wait before each retry, none after the last
    assert all(0 <= w <= 0.05 for w in waits) and len(set(waits)) > 1  # capped, and jittered
    assert line.startswith(f"DF-STORAGE s3.retry_budget: GetObject s3a://lake/p/x failed {len(tries)} time")
    assert "\n" not in line and "SlowDown" in line


def test_what_asking_again_does_not_change_is_not_retried() -> None:
    calls = []

    def denied() -> None:
        calls.append(1)
        raise Denied("An error occurred (AccessDenied)")

    with pytest.raises(Denied):
        RetryPolicy(budget_seconds=5).run("GetObject", "s3a://lake/x", denied)
    assert calls == [1]
    assert retryable(Throttled()) and retryable(ConnectionResetError()) and retryable(TimeoutError())
    assert not retryable(Denied()) and not retryable(ValueError())


def test_a_renewal_that_meets_this_runs_own_late_write_still_holds_the_table(tmp_path: Path) -> None:
    layout = StorageLayout(str(tmp_path))
    leases = TableLeases(layout, "p", "run-1", ttl_seconds=60)
    leases.acquire(["silver"])
    path = layout.lease("silver")
    found = layout.fs.read_versioned(path)
    assert found is not None
    late = found[0].replace('"expires": ', '"expires": 1')  # an earlier renewal of this run's, landed late
    layout.fs.write_if(path, late, found[1])
    leases.renew()
    assert leases.lost is None and set(leases.tokens) == {"silver"}
    assert '"run_id": "run-1"' in (layout.fs.read_text(path) or "") and leases.held_until > time.time() + 50


def test_a_renewal_that_meets_another_runs_record_names_that_run(tmp_path: Path) -> None:
    layout = StorageLayout(str(tmp_path))
    now = [1_000.0]
    first = TableLeases(layout, "p", "run-1", ttl_seconds=30, clock=lambda: now[0])
    first.acquire(["silver"])
    now[0] += 60  # run-1's hold has run out: run-2 takes the table
    TableLeases(layout, "p", "run-2", ttl_seconds=30, clock=lambda: now[0]).acquire(["silver"])
    first.renew()
    assert first.lost is not None and first.lost.startswith("lost table 'silver' to pipeline 'p' run run-2 ")
    assert "once the other ends" in first.lost_hint


def test_a_hold_is_judged_by_the_time_since_its_last_successful_renewal(tmp_path: Path) -> None:
    layout = StorageLayout(str(tmp_path))
    now = [1_000.0]
    leases = TableLeases(layout, "p", "run-1", ttl_seconds=30, clock=lambda: now[0], monotonic=lambda: now[0])
    leases.acquire(["bronze", "silver"])
    leases._renewers = [object()]  # type: ignore[list-item]  # as if renewing: `lost` watches the clock
    now[0] += 19  # no renewal since: 11 s of hold left, more than a third of the TTL
    assert leases.lost is None
    leases.renew()  # both renewed: each holds till 30 s from now
    now[0] += 19
    assert leases.lost is None and leases.held_until == pytest.approx(now[0] + 11)
    now[0] += 2  # 9 s left: within a third of the TTL of running out
    assert leases.lost == ("could not renew this run's table leases for 21 s (no renewal ran in time: the "
                           "process was too busy to schedule them)")
    assert "once the storage answers" in leases.lost_hint
    leases._renewers = []
    leases.release()


def test_a_system_clock_that_jumped_ahead_stops_the_run_and_says_so(tmp_path: Path) -> None:
    wall, steady = [1_000.0], [50.0]
    leases = TableLeases(StorageLayout(str(tmp_path)), "p", "run-1", ttl_seconds=30, clock=lambda: wall[0],
                         monotonic=lambda: steady[0])
    leases.acquire(["bronze"])
    leases._renewers = [object()]  # type: ignore[list-item]
    wall[0] += 22  # the hold looks 22 s old to every run on this machine, though 3 s passed
    steady[0] += 3
    assert leases.lost == ("could not renew this run's table leases for 22 s: the system clock jumped 19 s "
                           "ahead (3 s passed)")
    leases._renewers = []
    leases.release()


def test_a_table_taken_while_renewing_is_renewed_too(tmp_path: Path) -> None:
    leases = TableLeases(StorageLayout(str(tmp_path)), "p", "run-1", ttl_seconds=0.6)
    leases.acquire(["bronze"])
    leases.start_renewing()
    leases.acquire(["silver"])  # a flow's table taken once the run is under way
    taken = leases.expiries["silver"]
    deadline = time.monotonic() + 10
    while leases.expiries["silver"] == taken:
        assert time.monotonic() < deadline, "silver was never renewed"
        time.sleep(0.01)
    assert leases.lost is None
    leases.release()


def test_a_renewal_that_waits_on_the_storage_is_named_when_the_run_must_stop(tmp_path: Path) -> None:
    import threading

    now = [1_000.0]
    layout = StorageLayout(str(tmp_path))
    leases = TableLeases(layout, "p", "run-1", ttl_seconds=30, clock=lambda: now[0], monotonic=lambda: now[0])
    leases.acquire(["gold"])
    leases._renewers = [object()]  # type: ignore[list-item]
    answer, asked = threading.Event(), threading.Event()
    write_if = layout.fs.write_if

    def slow_write_if(path: str, text: str, token: str | None) -> str | None:
        asked.set()
        answer.wait(10)
        return write_if(path, text, token)

    layout.fs.write_if = slow_write_if  # type: ignore[method-assign]
    renewal = threading.Thread(target=leases._renew, args=("gold",))
    renewal.start()
    assert asked.wait(10)
    now[0] += 21
    assert leases.lost == ("could not renew this run's table leases for 21 s (storage too slow to answer: "
                           "the renewal of 'gold' has waited 21 s)")
    answer.set()
    renewal.join()
    leases._renewers = []
    leases.release()
