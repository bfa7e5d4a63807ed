"""Crash points named together: the process group dies once at the last one reached, the others waiting."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from deltaflow import faults


@pytest.fixture
def kills(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The points at which the process group would have been killed (none is, here)."""
    killed: list[str] = []
    monkeypatch.setattr(faults, "_hits", Counter())
    monkeypatch.setattr(faults, "_reached", set())
    monkeypatch.setattr(faults, "_kill", killed.append)
    return killed


def test_points_named_together_kill_once_all_are_reached(
        kills: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(faults.ENV, "after_commit:a,after_commit:b@2")
    monkeypatch.setattr(faults, "WAIT_SECONDS", 1)  # the kill is not real: a's thread goes on after this
    first = threading.Thread(target=faults.crash_point, args=("after_commit:a",), daemon=True)
    first.start()
    faults.crash_point("after_commit:b")  # not yet: its second time is named
    faults.crash_point("after_commit:other")
    assert kills == [] and first.is_alive()  # a waits at its point
    faults.crash_point("after_commit:b")
    assert kills == ["after_commit:b"] and first.is_alive()  # the kill would take a's thread with it
    assert "crash point after_commit:a reached: waiting for after_commit:b" in capsys.readouterr().err
    first.join()


def test_a_point_never_reached_is_named_and_the_group_dies_anyway(
        kills: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(faults.ENV, "after_commit:a, after_commit:b")
    monkeypatch.setattr(faults, "WAIT_SECONDS", 0.01)
    faults.crash_point("after_commit:a")
    assert kills == ["after_commit:a"]
    assert "crash points not reached in 0.01 s: after_commit:b" in capsys.readouterr().err
