"""The tutorial (docs/tutorial.md) as a reader follows it, from ``deltaflow init`` in an empty folder to the
pipeline over Kafka (issue 42). The files the page shows are the files used here: the starter that
``deltaflow init`` writes, and ``docs/tutorial/events-0002.json``, ``deltaflow.yml``, ``pipeline.py`` and
``produce.py``. Tables are read back with ``deltalake``."""

from __future__ import annotations

import json
import runpy
import shutil
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from deltaflow.pipeline import Pipeline
from helpers import cli

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial"


def rows(table: str) -> list[dict[str, Any]]:
    """``table`` of the project in the working folder."""
    return DeltaTable(Pipeline.load(Path()).layout.table(table)).to_pyarrow_table().to_pylist()


def gold() -> dict[str, tuple[int, float]]:
    return {r["action"]: (r["events"], r["amount"]) for r in rows("gold_actions")}


def reasons() -> list[str]:
    return sorted(reason for r in rows("silver_events_quarantine") for reason in r["failed_expectations"])


def shown(capsys, *args: str) -> dict[str, tuple[int, float]]:  # type: ignore[no-untyped-def]
    """gold_actions as ``deltaflow ARGS --json`` prints it."""
    lines = printed(capsys, *args, "--json").splitlines()
    return {r["action"]: (r["events"], r["amount"]) for r in map(json.loads, lines)}


def printed(capsys, *args: str) -> str:  # type: ignore[no-untyped-def]
    """What ``deltaflow ARGS`` printed to stdout (for a script to parse)."""
    done = cli(capsys, *args)
    assert done.returncode == 0, f"deltaflow {' '.join(args)}: {done.stderr}"
    return done.stdout


def ok(capsys, *args: str) -> str:  # type: ignore[no-untyped-def]
    done = cli(capsys, *args)
    assert done.returncode == 0, f"deltaflow {' '.join(args)}: {done.stderr}"
    return done.stdout + done.stderr


def test_the_tutorial_runs_as_written(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, capsys, monkeypatch, kafka_bootstrap: str) -> None:
    # 1. A new project
    monkeypatch.chdir(tmp_path)
    ok(capsys, "init", "shop")
    monkeypatch.chdir(tmp_path / "shop")
    # 2. Run it
    ok(capsys, "dry-run")
    ok(capsys, "run", "--available-now")
    assert len(rows("bronze_events")) == 6 and len(rows("silver_events")) == 4
    assert reasons() == ["has_user"]
    assert gold() == {"view": (2, 0.0), "buy": (2, 62.49)}
    assert shown(capsys, "show", "gold_actions") == gold()
    after_first = DeltaTable(Pipeline.load(Path()).layout.table("gold_actions")).version()
    assert after_first == 1  # the version the page names
    # 3. New input
    shutil.copy(TUTORIAL / "events-0002.json", "landing/")
    ok(capsys, "run", "--available-now")
    assert gold() == {"view": (3, 0.0), "buy": (3, 72.49)}
    assert shown(capsys, "show", "gold_actions") == gold()
    first = {"view": (2, 0.0), "buy": (2, 62.49)}
    assert shown(capsys, "show", "gold_actions", "--version", "1") == first
    # 4. Look at it
    assert "silver_events" in ok(capsys, "status")
    buys = [json.loads(line) for line in
            printed(capsys, "show", "silver_events", "--where", "action = 'buy'", "--json").splitlines()]
    assert sorted(r["event_id"] for r in buys) == sorted(r["event_id"] for r in rows("silver_events")
                                                         if r["action"] == "buy")
    query = "SELECT user_id, count(*) AS events FROM silver_events GROUP BY user_id"
    per_user = printed(capsys, "sql", query, "--csv").splitlines()
    assert per_user[0] == "user_id,events" and len(per_user) - 1 == len({r["user_id"] for r in
                                                                       rows("silver_events")})
    assert "gold_actions" in ok(capsys, "history", "gold_actions")
    assert "has_user" in ok(capsys, "quarantine", "silver_events")
    # 5. Over Kafka
    monkeypatch.chdir(tmp_path)
    ok(capsys, "init", "clicks")
    monkeypatch.chdir(tmp_path / "clicks")
    shutil.copy(TUTORIAL / "deltaflow.yml", "deltaflow.yml")
    shutil.copy(TUTORIAL / "pipeline.py", "transformations/pipeline.py")
    monkeypatch.setenv("KAFKA_BOOTSTRAP", kafka_bootstrap)
    runpy.run_path(str(TUTORIAL / "produce.py"))
    ok(capsys, "run", "--available-now")
    assert gold() == {"view": (2, 0.0), "buy": (2, 62.49)}
    assert shown(capsys, "show", "gold_actions") == gold()
    assert reasons() == ["has_user", "malformed_json"]
