"""`deltaflow quarantine TABLE --replay`: once the rule is fixed, quarantined rows reach the table, once."""

from __future__ import annotations

import json
import textwrap
import uuid
from typing import Any

from deltaflow.commands.replay import apply_replay, pending_replay, replay_quarantine, start_replay
from deltaflow.pipeline import Pipeline
from deltaflow.resolve.resolver import Resolver
from deltaflow.spec import load_spec
from helpers import Project, cli

DEFS = """
import deltaflow as dp

@dp.table
def bronze():
    return dp.read_kafka("{topic}")

@dp.table
@dp.expect_or_quarantine("small", "amount < {limit}")
def silver():
    return dp.parse_json(spark.readStream.table("bronze"), "event_id STRING, amount DOUBLE",
                         required=["event_id"])
"""


def define(project: Project, topic: str, limit: int) -> None:
    (project.root / "transformations" / "defs.py").write_text(textwrap.dedent(DEFS.format(topic=topic,
                                                                                          limit=limit)))


def ids(project: Project, table: str) -> list[str]:
    rows = project.rows(table)
    key = "event_id" if table == "silver" else "record"
    return sorted(str(r[key]) for r in rows)


def resolver(spark, project: Project) -> Resolver:  # type: ignore[no-untyped-def]
    spec = load_spec(project.spec_path)
    return Pipeline(spec, spark=spark).resolve()


def test_replay_after_fixing_the_rule_feeds_each_row_once(  # type: ignore[no-untyped-def]
        spark, kafka_bootstrap: str, tmp_path, capsys, storage) -> None:
    from deltaflow.dev.generator import produce
    from deltaflow.dev.topics import create_topic

    topic = f"replay-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, partitions=2)
    events: list[Any] = [{"event_id": f"e{i:02d}", "amount": float(i * 10)} for i in range(40)]
    produce(kafka_bootstrap, topic, [*events, b"{not json", b"[1, 2]"])
    project = Project(tmp_path / "p", "", bootstrap=kafka_bootstrap, s3=storage)
    define(project, topic, limit=200)
    spec = load_spec(project.spec_path)
    Pipeline(spec, spark=spark).run("available_now")
    small = [e["event_id"] for e in events if e["amount"] < 200]
    assert ids(project, "silver") == small
    assert len(ids(project, "silver_quarantine")) == 40 - len(small) + 2

    # The rule was too strict: fix it, then re-feed the rows it quarantined (not the malformed ones).
    define(project, topic, limit=350)
    where = "array_contains(failed_expectations, 'small')"
    # A replay interrupted after its writes (its record left behind) ...
    intent = start_replay(resolver(spark, project), "silver", where)
    apply_replay(resolver(spark, project), intent)
    assert pending_replay(project.layout, "silver") == intent
    # ... is finished, not repeated, by the next one: each row once.
    result = replay_quarantine(resolver(spark, project), "silver", where="true")
    assert result.resumed and result.replayed == 40 - len(small)
    passing = [e["event_id"] for e in events if e["amount"] < 350]
    assert ids(project, "silver") == passing
    quarantine = project.rows("silver_quarantine")
    reasons = sorted(tuple(q["failed_expectations"]) for q in quarantine)
    assert reasons == [("malformed_json",)] * 2 + [("small",)] * (40 - len(passing))
    assert pending_replay(project.layout, "silver") is None

    # Through the CLI, with nothing left that the fixed rule lets through: nothing changes.
    shown = cli(capsys, "quarantine", "replay", "silver", "--where", where, "--spec", str(project.spec_path))
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert f"{40 - len(passing)} quarantined rows re-fed, 0 passed" in shown.stdout
    assert ids(project, "silver") == passing
    assert len(project.rows("silver_quarantine")) == len(quarantine)

    # A full refresh rebuilds silver from bronze through the fixed rule: the same rows; the event log
    # (read by `status`, without a JVM) has every flow of both runs.
    from deltaflow.runtime.run_plan import RunPlan

    outcomes = Pipeline(load_spec(project.spec_path), spark=spark).run(
        "available_now", plan=RunPlan(full_refresh=frozenset({"silver"})))
    assert {o.state for o in outcomes} == {"completed"}
    assert ids(project, "silver") == passing
    assert project.layout.current_generation("silver", "silver") == 1
    status = cli(capsys, "status", "--json", "--spec", str(project.spec_path))
    assert status.returncode == 0, status.stderr
    assert {json.loads(line)["flow"]: json.loads(line)["state"] for line in status.stdout.splitlines()} == {
        "bronze": "completed", "silver": "completed"}
