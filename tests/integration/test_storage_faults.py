"""Storage faults (issue 40, problem 7): S3 answering 503 SlowDown or 500, dropping connections, losing
answers, in the middle of a batch, a checkpoint write, a lease renewal or an event-log append; and a fault
that outlasts every retry. The run either retries through, or stops with one line and loses nothing.

The faults come from the session's local S3 server itself (:mod:`deltaflow.dev.s3_faults`); each test
asserts that its faults fired, so none passes without meeting them.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deltalake.exceptions import TableNotFoundError

from deltaflow.dev.s3_faults import FaultRule, S3Faults
from deltaflow.errors import DeltaflowError, FlowError, StorageError
from deltaflow.runtime import event_log
from deltaflow.runtime.event_log import EventLog, end_event
from deltaflow.spec import S3Spec
from deltaflow.storage import StorageLayout, s3
from deltaflow.storage.lease import TableLeases
from helpers import Project


def test_the_server_fails_what_it_is_told_and_the_retry_policy_gets_through_or_says_so_in_one_line(  # type: ignore[no-untyped-def]
        faults: S3Faults, s3_root: str, s3_spec: S3Spec) -> None:
    fs = StorageLayout(s3_root, s3_spec.model_copy(update={"retry_budget": "3 seconds"})).fs
    faults.set([FaultRule(path=r"/a$", method="PUT", first=2),
                FaultRule(path=r"/b$", method="GET", status=None, reset=True, first=1),
                FaultRule(path=r"/c$", method="PUT", status=500)])
    fs.write_text(f"{s3_root}/a", "a")  # 503, 503, then through
    fs.write_text(f"{s3_root}/b", "b")
    assert fs.read_text(f"{s3_root}/b") == "b"  # dropped once, then through
    began = time.monotonic()
    with pytest.raises(StorageError) as failed:
        fs.write_text(f"{s3_root}/c", "c")  # every attempt, till the budget is spent
    line = str(failed.value)
    assert 2 < time.monotonic() - began < 10 and "\n" not in line, line
    hits = faults.hits()
    assert hits[:2] == [2, 1] and hits[2] > 3, hits  # more tries than a count of 3 allows, in 3 s
    assert line.startswith(f"DF-STORAGE s3.retry_budget: PutObject {s3_root}/c failed {hits[2]} time(s) in ")
    assert "InternalError" in line and "retry budget (3 s)" in line, line


def test_a_lease_renewal_whose_answer_was_lost_still_holds_the_table(  # type: ignore[no-untyped-def]
        faults: S3Faults, s3_root: str, s3_spec: S3Spec) -> None:
    """The renewal was written, its answer lost: the retry's condition meets the renewal's own write."""
    layout = StorageLayout(s3_root, s3_spec)
    leases = TableLeases(layout, "p", "run-1", ttl_seconds=60)
    leases.acquire(["silver"])
    lost_answer = FaultRule(path="/_leases/silver.json$", method="PUT", status=None, answer_lost=True,
                            first=1)
    faults.set([lost_answer])
    leases.renew()
    assert faults.hits() == [1]  # the first attempt was written and its answer dropped; the retry met it
    assert leases.lost is None and set(leases.tokens) == {"silver"}
    faults.set([FaultRule(path="/_leases/silver.json$", method="PUT", first=2)])
    leases.renew()  # 503 SlowDown twice, then through
    assert faults.hits() == [2] and leases.lost is None
    holder = json.loads(layout.fs.read_text(layout.lease("silver")) or "{}")
    assert holder["run_id"] == "run-1" and holder["expires"] == pytest.approx(leases.held_until)
    leases.release()


def test_a_lease_renewal_that_times_out_is_tried_again_and_holds_the_table(  # type: ignore[no-untyped-def]
        faults: S3Faults, s3_root: str, s3_spec: S3Spec, monkeypatch) -> None:
    """The store answers the first attempt after the client stopped waiting; the retry gets through."""
    monkeypatch.setattr(s3, "READ_TIMEOUT_SECONDS", 1.0)
    layout = StorageLayout(s3_root, s3_spec)
    leases = TableLeases(layout, "p", "run-1", ttl_seconds=60)
    leases.acquire(["silver"])
    faults.set([FaultRule(path="/_leases/silver.json$", method="PUT", status=None, delay=3.0, first=1)])
    began = time.monotonic()
    leases.renew()
    assert faults.hits() == [1] and time.monotonic() - began < 3.0  # not waiting for the late answer
    assert leases.lost is None
    time.sleep(max(0.0, began + 3.5 - time.monotonic()))  # what never happens cannot be awaited: the late
    # first attempt lands by now, its condition stale, and must not have undone the renewal
    holder = json.loads(layout.fs.read_text(layout.lease("silver")) or "{}")
    assert holder["run_id"] == "run-1" and holder["expires"] == pytest.approx(leases.held_until)
    leases.release()


def test_renewals_that_keep_failing_stop_the_run_before_its_hold_runs_out(  # type: ignore[no-untyped-def]
        faults: S3Faults, s3_root: str, s3_spec: S3Spec) -> None:
    layout = StorageLayout(s3_root, s3_spec)
    leases = TableLeases(layout, "p", "run-1", ttl_seconds=3)
    leases.acquire(["silver"])
    faults.set([FaultRule(path="/_leases/", method="PUT")])
    leases.start_renewing()
    deadline = time.monotonic() + 60
    while leases.lost is None:
        assert time.monotonic() < deadline, "renewals failed and the run was not told"
        time.sleep(0.05)
    assert time.time() < leases.held_until, "told only once the hold had run out"
    assert leases.lost.startswith("could not renew this run's table leases for 2 s")
    assert faults.hits()[0] >= 1
    faults.clear()
    leases.release()


def test_event_log_appends_that_fail_or_lose_their_answer_are_written_once_later(  # type: ignore[no-untyped-def]
        faults: S3Faults, s3_root: str, s3_spec: S3Spec) -> None:
    """An append refused (past deltalake's own retries) is tried again with the next; one whose commit was
    written and its answer lost is found by its transaction and not written twice."""
    layout = StorageLayout(s3_root, s3_spec)
    commits = r"/_event_log/_delta_log/\d+\.json$"
    faults.set([FaultRule(path=commits, method="PUT", status=503, times=2)])
    log = EventLog(layout.event_log, "p", storage_options=layout.storage_options)
    log.add(end_event("p", log.run_id, "a", "completed", None))
    await_hits(faults, [2])
    log.add(end_event("p", log.run_id, "b", "completed", None))  # with a's, once the store answers
    await_logged(layout, ["a", "b"])
    faults.set([FaultRule(path=commits, method="PUT", status=None, answer_lost=True, times=1)])
    log.add(end_event("p", log.run_id, "c", "completed", None))
    await_hits(faults, [1])
    log.add(end_event("p", log.run_id, "d", "completed", None))
    assert log.close() is None and not log.unwritten
    assert logged_flows(layout) == ["a", "b", "c", "d"]


def logged_flows(layout: StorageLayout) -> list[str]:
    try:
        return sorted(r["flow"] for r in layout.open_table(layout.event_log).to_pyarrow_table().to_pylist())
    except TableNotFoundError:
        return []


def await_logged(layout: StorageLayout, flows: list[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while logged_flows(layout) != flows:
        assert time.monotonic() < deadline, f"the event log holds {logged_flows(layout)}, not {flows}"
        time.sleep(0.05)


def await_hits(faults: S3Faults, hits: list[int], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while faults.hits() != hits:
        assert time.monotonic() < deadline, f"the faults fired {faults.hits()} times, not {hits}"
        time.sleep(0.05)


PIPELINE = """
import deltaflow as dp

@dp.table
def bronze():
    return dp.read_files("landing", format="json", schema="id STRING, n INT")

@dp.table
def silver():
    return dp.read_stream("bronze", maxFilesPerTrigger=1000).where("n >= 0")
"""


def on_s3(make_project: Any, s3_root: str, s3_spec: S3Spec, budget: str = "2 minutes") -> Project:
    project = make_project(PIPELINE, s3=(s3_root, s3_spec.model_copy(update={"retry_budget": budget})))
    for file in range(3):
        project.drop(f"{file}.json", [{"id": f"e{file}-{i}", "n": i} for i in range(40)])
    return project


def assert_exact(project: Project) -> None:
    expected = sorted(f"e{file}-{i}" for file in range(3) for i in range(40))
    for table in ("bronze", "silver"):
        assert sorted(r["id"] for r in project.rows(table)) == expected, table


def test_a_run_retries_through_faults_at_every_moment(  # type: ignore[no-untyped-def]
        spark, make_project, s3_root: str, s3_spec: S3Spec, faults: S3Faults) -> None:
    """Each first attempt fails: data files and Delta commits (mid-batch), checkpoint entries, the event log,
    the leases; reads of the Delta log are dropped once each."""
    project = on_s3(make_project, s3_root, s3_spec)
    rules = [FaultRule(path=r"/tables/(bronze|silver)/part-.*\.parquet", method="PUT", first=1),
             FaultRule(path=r"/tables/(bronze|silver)/_delta_log/\d+\.json", method="PUT", status=500,
                       first=1),
             FaultRule(path=r"/_checkpoints/.*/(offsets|commits)/", method="PUT", first=1),
             FaultRule(path=r"/_event_log/", method="PUT", first=1),
             FaultRule(path=r"/_leases/", method="PUT", first=1),
             FaultRule(path=r"/tables/bronze/_delta_log/\d+\.json", method="GET", status=None, reset=True,
                       first=1)]
    faults.set(rules)
    messages: list[str] = []
    outcomes = project.pipeline(spark).run("available_now", on_message=messages.append)
    hits = faults.hits()
    faults.clear()
    assert [o.state for o in outcomes] == ["completed", "completed"]
    assert all(hits), dict(zip([r.path for r in rules], hits, strict=True))  # every fault met the run
    assert not [m for m in messages if "event log" in m], messages  # its events were retried in, too
    assert_exact(project)
    logged = project.layout.open_table(project.layout.event_log).to_pyarrow_table().to_pylist()
    assert sum(r["input_rows"] for r in logged if r["flow"] == "bronze" and r["kind"] == "batch") == 120


def stopped_by(spark: Any, project: Project, faults: S3Faults, rule: FaultRule, mode: str,
               error: type[DeltaflowError]) -> str:
    """Run ``project`` while ``rule`` fails its requests: the run must stop with ``error``, in one line, which
    is returned; then, the storage well again, a rerun must land every row once."""
    faults.set([rule])
    with pytest.raises(error) as failed:
        project.pipeline(spark).start(mode).finish(threading.Event())
    assert faults.hits()[0] > 0
    faults.clear()
    project.run(spark)
    assert_exact(project)
    line = str(failed.value)
    assert "\n" not in line, line
    return line


def test_a_fault_that_outlasts_the_retries_stops_the_run_in_one_line_and_a_rerun_is_exact(  # type: ignore[no-untyped-def]
        spark, make_project, s3_root: str, s3_spec: S3Spec, faults: S3Faults) -> None:
    line = stopped_by(spark, on_s3(make_project, s3_root, s3_spec, budget="5 seconds"), faults,
                      FaultRule(path=r"/tables/silver/part-.*\.parquet", method="PUT", status=500),
                      "available_now", FlowError)
    assert "'silver'" in line and "Status Code: 500" in line, line


def test_an_event_log_that_stays_unwritable_stops_the_run_in_one_line_and_a_rerun_is_exact(  # type: ignore[no-untyped-def]
        spark, make_project, s3_root: str, s3_spec: S3Spec, faults: S3Faults, monkeypatch) -> None:
    monkeypatch.setattr(event_log, "PATIENCE_SECONDS", 2.0)
    # each append gives up after the retry budget (deltalake's retry_timeout): a short one, so that the
    # patience, not the budget, is what the run waits for
    line = stopped_by(spark, on_s3(make_project, s3_root, s3_spec, budget="5 seconds"), faults,
                      FaultRule(path=r"/_event_log/_delta_log/\d+\.json$", method="PUT", status=503),
                      "continuous", StorageError)
    assert "could not be written for" in line and "tables are not affected" in line, line


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A project whose storage folder is a 48 MiB tmpfs: a local disk that fills up (mounting needs root,
    as in CI's container)."""
    disk = tmp_path / "p" / "storage"
    disk.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Take every byte left on ``disk``; the file that holds them."""
    filler = disk / f"filler-{time.monotonic_ns()}"
    with filler.open("wb", buffering=0) as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 2**16)
    return filler


def test_a_disk_that_fills_up_stops_the_run_in_one_line_and_a_rerun_is_exact(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, small_disk: Path) -> None:
    project = Project(tmp_path / "p", PIPELINE)
    assert project.storage == small_disk

    def drop(files: range) -> None:
        for file in files:
            project.drop(f"{file}.json", [{"id": f"e{file}-{i}", "n": i} for i in range(40)])

    drop(range(3))
    run = project.pipeline(spark).start("continuous")  # a run under way when the disk fills up
    ended: list[BaseException] = []
    waiter = threading.Thread(target=lambda: _finish(run, ended), daemon=True)
    waiter.start()
    bronze = Path(project.table("bronze")) / "_delta_log" / f"{1:020d}.json"
    deadline = time.monotonic() + 120
    while not bronze.exists():
        assert time.monotonic() < deadline and waiter.is_alive(), "the run did not commit its first batch"
        time.sleep(0.05)
    filled = fill(small_disk)
    drop(range(3, 6))
    waiter.join(timeout=180)
    assert not waiter.is_alive(), "the run went on with a full disk"
    [error] = ended
    line = str(error)
    assert isinstance(error, DeltaflowError) and "\n" not in line, line
    assert "No space left on device" in line, line

    with pytest.raises(DeltaflowError, match=f"{small_disk}.*No space left on device"):  # before it writes
        project.pipeline(spark).start("available_now")
    filled.unlink()
    project.run(spark)
    expected = sorted(f"e{file}-{i}" for file in range(6) for i in range(40))
    for table in ("bronze", "silver"):
        assert sorted(r["id"] for r in project.rows(table)) == expected, table


def _finish(run: Any, ended: list[BaseException]) -> None:
    try:
        run.finish(threading.Event())
    except BaseException as exc:  # handed to the test's thread
        ended.append(exc)
