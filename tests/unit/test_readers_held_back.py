"""Rule 13 without Spark: which failed flow holds a reader back, transitively, and how a run says so."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from deltaflow.cli.progress import FlowTotals, format_outcome
from deltaflow.errors import FlowError
from deltaflow.runtime.holdback import failed_upstream, run_failure, skipped
from deltaflow.runtime.outcomes import FlowOutcome


@dataclass
class Query:
    """What the run asks of an ended (or running) streaming query."""

    isActive: bool  # (Spark's name)
    error: Exception | None = None

    def exception(self) -> Exception | None:
        return self.error


def test_a_reader_is_held_back_by_a_failed_input_or_by_the_failure_behind_a_skipped_one() -> None:
    failed = FlowOutcome("silver", "defs.py:9", "failed", "boom")
    finished = {"silver": failed, "gold": skipped("gold", "defs.py:20", "silver")}
    assert failed_upstream(["bronze", "silver"], finished, {}) == "silver"
    assert failed_upstream(["gold"], finished, {}) == "silver"  # platinum reads gold: the root is named
    assert failed_upstream(["bronze"], {"bronze": FlowOutcome("bronze", "d:1", "completed")}, {}) is None
    queries = {"bronze": Query(isActive=False, error=RuntimeError("x")), "other": Query(isActive=False),
               "live": Query(isActive=True)}
    assert failed_upstream(["other", "live"], {}, queries) is None  # ended well, still running
    assert failed_upstream(["other", "bronze"], {}, queries) == "bronze"  # its query ended with an error


def test_the_run_s_error_names_the_failed_flows_and_the_skipped_ones_and_each_says_why() -> None:
    outcomes = [FlowOutcome("bronze", "defs.py:4", "completed"),
                FlowOutcome("silver", "defs.py:9", "failed", "boom"),
                skipped("gold", "defs.py:20", "silver"), skipped("platinum", "defs.py:25", "silver")]
    error = run_failure(outcomes)
    assert error is not None and error.outcomes == tuple(outcomes)
    assert str(error) == ("DF-FLOW 1 flow failed: 'silver' (defs.py:9): boom; "
                          "skipped downstream: 'gold', 'platinum'")
    assert run_failure(outcomes[:1]) is None
    assert [format_outcome(o, FlowTotals(rows=7) if o.flow == "bronze" else None) for o in outcomes] == [
        "bronze: completed, read 7 rows this run", "silver: failed, read 0 rows this run",
        "gold: skipped: upstream 'silver' failed", "platinum: skipped: upstream 'silver' failed"]


def test_a_failing_full_refresh_fails_its_flows_and_the_refreshes_downstream_are_skipped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from deltaflow.runtime import holdback

    refreshed: list[str] = []

    def refresh_dataset(writers: Any, dataset: str, on_message: Any) -> None:
        refreshed.append(dataset)
        raise FlowError(f"full refresh of '{dataset}' failed: boom", location="defs.py:9")

    monkeypatch.setattr(holdback, "refresh_dataset", refresh_dataset)
    flows = {"silver": [SimpleNamespace(name="silver", location="defs.py:9")],
             "gold": [SimpleNamespace(name="gold", location="defs.py:20")]}
    writers: Any = SimpleNamespace(resolver=SimpleNamespace(graph=SimpleNamespace(flows_into=flows.get)),
                                   on_message=print)
    inputs = {"silver": [("bronze", "stream")], "gold": [("silver", "batch")]}
    failed = holdback.refresh(writers, "silver", {}, inputs.__getitem__)
    assert failed == {"silver": FlowOutcome("silver", "defs.py:9", "failed",
                                            "full refresh of 'silver' failed: boom")}
    assert holdback.refresh(writers, "gold", failed, inputs.__getitem__) == {
        "gold": skipped("gold", "defs.py:20", "silver")}
    assert refreshed == ["silver"]  # gold is not recomputed from a table whose rebuild failed
