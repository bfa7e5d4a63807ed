"""Auto CDC flows, change-feed reads and foreach-batch sinks: exact results, exactly once.

Change events arrive as JSON file drops; every table is read back with ``deltalake``.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_model import replay, scd1, scd2
from cdc_project import COLUMNS, CUSTOMERS, forget_last_commit, graves, history, rows, run, txns, versions
from deltaflow.cli.render import text
from deltaflow.dev.sample_data import customer_changes
from deltaflow.errors import FlowError, GraphError
from deltaflow.pipeline import Pipeline
from deltaflow.runtime.run_plan import RunPlan
from deltaflow.sinks import cdc
from deltaflow.spec import load_spec
from helpers import Project, cli


def test_scd1_scd2_and_audit_match_a_reference_model_across_batches(  # type: ignore[no-untyped-def]
        spark, make_project, capsys) -> None:
    project = make_project(CUSTOMERS)
    events = customer_changes(60, 900, seed=11, disorder=40, duplicates=0.08, delete_share=0.15)
    thirds = [events[: len(events) // 3], events[len(events) // 3: 2 * len(events) // 3],
              events[2 * len(events) // 3:]]
    assert any(e["op"] == "DELETE" for e in events) and len(events) > 900
    seen: list[dict[str, Any]] = []
    for i, part in enumerate(thirds):
        project.drop(f"{i}.json", part)
        run(spark, project)
        seen += part
        expected_latest = sorted(scd1(seen, "customer_id", COLUMNS).values(), key=lambda r: r["customer_id"])
        assert sorted(rows(project, "customers", COLUMNS), key=lambda r: r["customer_id"]) == expected_latest
        assert history(project) == scd2(seen, "customer_id", COLUMNS)

    # The audit trail is the change feed, each change once, and replaying it gives the table.
    audit = rows(project, "customers_audit")
    feed = project.pipeline().changes("customers", 0)
    key = ("_commit_version", "_change_type", "customer_id")
    assert sorted(tuple(r[k] for k in key) for r in audit) == sorted(tuple(r[k] for k in key) for r in feed)
    assert len({tuple(r[k] for k in key) for r in audit}) == len(audit)
    assert replay(audit, "customer_id", COLUMNS) == expected_latest

    picture = text(project.pipeline(spark).dry_run())  # the graph says how each table is written
    assert "customers          streaming table, one MERGE per batch from one pass over it" in picture
    assert "customers_history  streaming table, one MERGE per batch, the touched keys' history" in picture

    # `deltaflow changes` (no JVM) shows the same feed, between two versions.
    def changes_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return cli(capsys, "changes", "customers", *args, "--spec", str(project.spec_path))

    def change(r: dict[str, Any]) -> tuple[Any, ...]:
        return r["_commit_version"], r["_change_type"], r["customer_id"], r["seq"]

    as_json = changes_cli("--from", "2", "--to", "3", "--json")
    assert as_json.returncode == 0, as_json.stderr
    shown = [change(json.loads(line)) for line in as_json.stdout.splitlines()]
    assert shown and shown == [change(r) for r in feed if 2 <= r["_commit_version"] <= 3]
    as_table = changes_cli("--from", "2", "--limit", "3")
    assert as_table.returncode == 0 and "more (--limit 0 shows all" in as_table.stdout
    counts = {r["_change_type"]: r["count"] for r in rows(project, "change_counts")}
    assert counts == {t: sum(1 for r in feed if r["_change_type"] == t) for t in counts}
    assert counts["delete"] > 0 and counts["update_postimage"] > 0

    # Every MERGE carried the flow's checkpoint identity and batch id ...
    for table, flow in (("customers", "customers"), ("customers_history", "history")):
        recorded = txns(project.table(table))  # each flow's own, though both ran at the same time
        assert recorded and all(t["appId"].startswith(f"deltaflow:{table}/{flow}/0:") for t in recorded)
        assert [t["version"] for t in recorded] == sorted({t["version"] for t in recorded})
    # ... so a batch replayed after its commit (checkpoint commit lost) changes nothing.
    # Its tombstones, written without the pair, may be appended twice: readers see the same ones.
    before = {t: (versions(project, t), rows(project, t)) for t in ("customers", "customers_history")}
    flows = (("customers", "customers"), ("customers_history", "history"))
    graves_before = [graves(project, *f) for f in flows]
    assert all(graves_before)
    for flow in flows:
        forget_last_commit(project.checkpoint(*flow))
    run(spark, project)
    assert {t: (versions(project, t), rows(project, t)) for t in before} == before
    assert [graves(project, *f) for f in flows] == graves_before

    # A full refresh rebuilds the table from the change log (new checkpoint, new tombstones), and its
    # change-feed readers from scratch; the SCD 2 table, not downstream, is left alone.
    run(spark, project, RunPlan(full_refresh=frozenset({"customers"})))
    assert sorted(rows(project, "customers", COLUMNS), key=lambda r: r["customer_id"]) == expected_latest
    assert (project.checkpoint("customers", generation=1) / "tombstones" / "_delta_log").is_dir()
    assert history(project) == scd2(seen, "customer_id", COLUMNS)
    assert versions(project, "customers_history") == before["customers_history"][0]
    audit = rows(project, "customers_audit")
    assert len(audit) == len(expected_latest) and {r["_change_type"] for r in audit} == {"insert"}


OPTIONS = """
import deltaflow as dp

@dp.table
def changes():
    return dp.read_files("landing", schema="id INT, a STRING, b STRING, op STRING, s1 INT, s2 INT")

@dp.temporary_view
def no_truncates():
    return dp.read_stream("changes").where("op != 'TRUNCATE'")

dp.create_streaming_table("latest")
dp.create_auto_cdc_flow(target="latest", source="no_truncates", keys=["id"], sequence_by=["s1", "s2"],
                        apply_as_deletes="op = 'D'", except_column_list=["op"], ignore_null_updates=True)

dp.create_streaming_table("wiped")
dp.create_auto_cdc_flow(target="wiped", source="changes", keys=["id"], sequence_by=["s1", "s2"],
                        apply_as_deletes="op = 'D'", apply_as_truncates="op = 'TRUNCATE'",
                        except_column_list=["op"])

dp.create_streaming_table("tracked")
dp.create_auto_cdc_flow(target="tracked", source="no_truncates", keys=["id"], sequence_by=["s1", "s2"],
                        apply_as_deletes="op = 'D'", column_list=["id", "a", "b", "s1", "s2"],
                        stored_as_scd_type="2", track_history_column_list=["a"])
"""


def ev(id: int | None, a: str | None, b: str | None, op: str, s1: int, s2: int = 0) -> dict[str, Any]:
    return {"id": id, "a": a, "b": b, "op": op, "s1": s1, "s2": s2}


def test_cdc_options_nulls_truncates_tracked_history_and_late_inserts(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(OPTIONS)
    project.drop("1.json", [
        ev(1, "x", "p", "I", 1), ev(1, None, "q", "U", 1, 5),
        ev(2, "m", "1", "I", 1), ev(2, "m", "2", "U", 2), ev(2, "n", "3", "U", 3),
        ev(5, None, None, "D", 7),
    ])
    run(spark, project)

    def by_id(table: str) -> list[dict[str, Any]]:
        return sorted(rows(project, table, ["id", "a", "b", "s1", "s2"]), key=lambda r: r["id"])

    assert by_id("latest") == [
        {"id": 1, "a": "x", "b": "q", "s1": 1, "s2": 5}, {"id": 2, "a": "n", "b": "3", "s1": 3, "s2": 0}]
    assert by_id("wiped") == [
        {"id": 1, "a": None, "b": "q", "s1": 1, "s2": 5}, {"id": 2, "a": "n", "b": "3", "s1": 3, "s2": 0}]

    project.drop("2.json", [
        ev(1, None, None, "U", 2),                        # nulls keep the stored values in 'latest'
        ev(3, "z", "z", "I", 1), ev(3, None, None, "D", 5),  # inserted and deleted in one batch
        ev(5, "late", "late", "I", 6),                    # older than its delete: must not come back
        ev(None, None, None, "TRUNCATE", 9), ev(4, "after", "after", "I", 10),
    ])
    run(spark, project)
    assert by_id("latest") == [
        {"id": 1, "a": "x", "b": "q", "s1": 2, "s2": 0}, {"id": 2, "a": "n", "b": "3", "s1": 3, "s2": 0},
        {"id": 4, "a": "after", "b": "after", "s1": 10, "s2": 0}]
    assert by_id("wiped") == [{"id": 4, "a": "after", "b": "after", "s1": 10, "s2": 0}]

    def at(s1: int | None, s2: int = 0) -> dict[str, int] | None:
        return None if s1 is None else {"s1": s1, "s2": s2}

    tracked = sorted(rows(project, "tracked"), key=lambda r: (r["id"], r["s1"], r["s2"]))
    assert [(r["id"], r["a"], r["b"], r["__START_AT"], r["__END_AT"]) for r in tracked] == [
        (1, "x", "p", at(1), at(1, 5)),
        (1, None, None, at(1, 5), None),      # a did not change at (2, 0): updated in place
        (2, "m", "2", at(1), at(3)),          # b changed at (2, 0), a did not: in place
        (2, "n", "3", at(3), None),
        (3, "z", "z", at(1), at(5)),          # closed by its delete
        (4, "after", "after", at(10), None),
        (5, "late", "late", at(6), at(7)),    # the late insert lands before the delete that came first
    ]


SINK = """
import os
import deltaflow as dp

@dp.foreach_batch_sink(name="two_tables")
def two_tables(df, batch_id):
    df.write.format("delta").mode("append").save({first!r})
    if os.path.exists({flag!r}):
        raise RuntimeError("crash between the two writes")
    df.write.format("delta").mode("append").save({second!r})

@dp.append_flow(target="two_tables")
def to_both():
    return dp.read_files("landing", schema="id STRING")
"""


def test_foreach_batch_sink_fans_out_exactly_once_across_a_crash(spark, make_project, tmp_path) -> None:  # type: ignore[no-untyped-def]
    first, second, flag = tmp_path / "first", tmp_path / "second", tmp_path / "fail"
    project = make_project(SINK.format(first=str(first), second=str(second), flag=str(flag)))
    project.drop("1.json", [{"id": f"a{i}"} for i in range(5)])
    flag.touch()
    with pytest.raises(FlowError, match=r"'to_both'.*RuntimeError: crash between the two writes"):
        run(spark, project)
    assert len(DeltaTable(str(first)).to_pyarrow_table()) == 5 and not second.exists()

    flag.unlink()
    run(spark, project)  # batch 0 again: the first write is skipped, the second is made
    project.drop("2.json", [{"id": "b0"}, {"id": "b1"}])
    run(spark, project)
    expected = sorted([f"a{i}" for i in range(5)] + ["b0", "b1"])
    for table in (first, second):
        assert sorted(DeltaTable(str(table)).to_pyarrow_table()["id"].to_pylist()) == expected
    assert [t["version"] for t in txns(str(first))] == [0, 1]


ERRORS = """
import deltaflow as dp

@dp.table
def changes():
    return dp.read_files("landing", schema="id INT, seq INT, op STRING")

dp.create_streaming_table("target")
dp.create_auto_cdc_flow(target="target", source="changes", keys=[{key!r}], sequence_by="seq")

@dp.table
def reader():
    return {read}
"""


@pytest.mark.parametrize(("key", "read", "message"), [
    ("idd", 'dp.read_stream("changes")', r"defs\.py:9: auto CDC flow 'target': keys column 'idd' is not in "
     r"the source \(columns: id, seq, op"),
    ("id", 'dp.read_stream("target")', r"defs\.py:13: flow 'reader' streams auto CDC target 'target'.*"
     r"dp\.read_changes\('target', stream=True\)"),
    ("id", 'dp.read_changes("target", stream=True)', r"defs\.py:13: flow 'reader' reads the change feed of "
     r"'target', which does not record one"),
    ("id", 'dp.read_changes("changes", stream=True, ending_version=3)', r"takes no ending_version"),
])
def test_cdc_mistakes_are_one_line_errors_at_their_line(spark, make_project: Callable[..., Project], key: str,
                                                        read: str, message: str) -> None:
    project = make_project(ERRORS.format(key=key, read=read))
    (project.root / "landing").mkdir()
    spec = load_spec(project.spec_path)
    with pytest.raises(GraphError, match=message):
        Pipeline(spec, spark=spark).dry_run()


@pytest.mark.parametrize("flow", ['"seq"', '"seq", apply_as_deletes="op = \'D\'"',
                                  '"seq", apply_as_truncates="op = \'T\'"', '["op", "seq"]',
                                  '"seq", stored_as_scd_type=2'])
@pytest.mark.parametrize(("events", "message"), [
    ([(1, 1, "I"), (2, None, "I"), (None, 3, "I"), (3, None, "U")],
     "2 event(s) have a null sequence_by ({sequence})"),
    ([(1, 1, "I"), (None, 2, "I")], "1 event(s) have a null key (id)"),
    ([(1, 1, "I"), (1, None, "U")], "1 event(s) have a null sequence_by ({sequence})"),  # not the latest
])
def test_an_event_without_a_key_or_a_sequence_stops_the_flow_and_applies_nothing(  # type: ignore[no-untyped-def]
        spark, make_project, events: list[tuple[int | None, int | None, str]], message: str,
        flow: str) -> None:
    code = ERRORS.format(key="id", read='dp.read_stream("changes")')
    project = make_project(code.replace('sequence_by="seq")', f"sequence_by={flow})"))
    message = message.format(sequence="op, seq" if flow.startswith("[") else "seq")
    project.drop("1.json", [{"id": i, "seq": q, "op": o} for i, q, o in events])
    with pytest.raises(FlowError, match=rf"auto CDC flow 'target': {re.escape(message)}"):
        run(spark, project)
    assert rows(project, "target") == []  # the batch's good events are not applied either: it runs again
    with pytest.raises(FlowError, match=re.escape(message)):
        run(spark, project)
    assert rows(project, "target") == []


def test_change_feed_for_every_table_from_the_spec(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    code = ERRORS.format(key="id", read='dp.read_changes("target", stream=True)')
    project = make_project(code, spec_extra="table_properties:\n  delta.enableChangeDataFeed: true\n")
    (project.root / "landing").mkdir()
    spec = load_spec(project.spec_path)
    resolver = Pipeline(spec, spark=spark).resolve()
    assert resolver.flows["reader"].changes == {"target"}
    assert "_change_type" in resolver.schemas["reader"].names
    for table in ("changes", "target"):
        configuration = DeltaTable(project.table(table)).metadata().configuration
        assert configuration["delta.enableChangeDataFeed"] == "true"
    # The reader holds change-feed rows: Delta forbids a feed of its own, so the default skips it.
    assert "delta.enableChangeDataFeed" not in DeltaTable(project.table("reader")).metadata().configuration
    # Asked for by the table itself, it is an error at its definition, found by a dry run.
    asked = make_project(code.replace("@dp.table\ndef reader", "@dp.table(table_properties="
                                      "{'delta.enableChangeDataFeed': 'true'})\ndef reader"), name="asked",
                         spec_extra="table_properties:\n  delta.enableChangeDataFeed: true\n")
    (asked.root / "landing").mkdir()
    spec = load_spec(asked.spec_path)
    with pytest.raises(GraphError, match=r"defs\.py:11: 'reader' holds the change-feed columns _change_type, "
                       "_commit_version, _commit_timestamp"):
        Pipeline(spec, spark=spark).dry_run()


@pytest.mark.parametrize("copy", [True, False])
def test_tombstones_are_joined_only_to_a_batch_with_events_old_enough_to_be_buried(  # type: ignore[no-untyped-def]
        spark, make_project, monkeypatch, copy: bool) -> None:
    from deltaflow.sinks import tombstones

    if not copy:  # no copy in the driver once there are tombstones: they are joined to every batch
        monkeypatch.setattr(tombstones, "COPY_LIMIT", 0)
    joins: list[int] = []
    unburied = cdc.AutoCdcWriter._unburied
    monkeypatch.setattr(cdc.AutoCdcWriter, "_unburied", lambda w, df: joins.append(1) or unburied(w, df))
    code = ERRORS.format(key="id", read='dp.read_stream("changes")')
    deletes = 'sequence_by="seq", apply_as_deletes="op = \'D\'")'
    project = make_project(code.replace('sequence_by="seq")', deletes))
    for number, events, joined, expected in [
        (1, [(1, 1, "I"), (2, 2, "I"), (1, 3, "D")], (0, 0), [2]),  # no tombstone yet
        (2, [(3, 4, "I"), (2, 5, "U")], (0, 1), [2, 3]),  # every sequence above the tombstone's, (1, 3)
        (3, [(1, 2, "I"), (4, 6, "I")], (1, 1), [2, 3, 4]),  # (1, 2) is buried: 1 is not brought back
        (4, [(1, 7, "I")], (0, 1), [1, 2, 3, 4]),  # above (1, 3): 1 is back
    ]:
        joins.clear()
        project.drop(f"{number}.json", [{"id": i, "seq": q, "op": o} for i, q, o in events])
        run(spark, project)
        assert sorted(r["id"] for r in rows(project, "target")) == expected, number
        assert len(joins) == joined[0 if copy else 1], number


def test_at_one_sequence_a_delete_wins_over_an_upsert_of_the_same_batch(  # type: ignore[no-untyped-def]
        spark, make_project) -> None:
    code = ERRORS.format(key="id", read='dp.read_stream("changes")')
    deletes = 'sequence_by="seq", apply_as_deletes="op = \'D\'")'
    project = make_project(code.replace('sequence_by="seq")', deletes))
    project.drop("1.json", [{"id": 1, "seq": 1, "op": "I"}, {"id": 2, "seq": 2, "op": "I"}])
    run(spark, project)
    tied = [(1, 5, "U"), (1, 5, "D"), (3, 6, "D"), (3, 6, "I")]  # a stored key and a new one, both orders
    project.drop("2.json", [{"id": i, "seq": q, "op": o} for i, q, o in tied])
    run(spark, project)
    assert [r["id"] for r in rows(project, "target")] == [2]
