"""Bad input from Kafka: 100,000 events, 5 % of them malformed in 12 ways; nothing crashes, nothing is lost.

Every malformed record lands in ``silver_events_quarantine`` with its reason and its Kafka position; the
good records land in ``silver_events`` exactly; the event log accounts for every row of every batch.
"""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from typing import Any

import pytest
from deltalake import DeltaTable

from deltaflow.pipeline import Pipeline
from deltaflow.spec import load_spec
from helpers import Project, cli

pytestmark = pytest.mark.slow

EVENTS = 100_000
BAD_SHARE = 0.05

PIPELINE = """
import deltaflow as dp

SCHEMA = "event_id STRING, user_id STRING, amount DOUBLE, quantity INT, event_time TIMESTAMP"

@dp.table
def bronze_events():
    return dp.read_kafka("{topic}", max_offsets_per_trigger=25_000)

@dp.table
def silver_events():
    return dp.parse_json(spark.readStream.table("bronze_events"), SCHEMA, required=["event_id", "user_id"],
                         keep=["topic", "partition", "offset"], max_bytes=4_096)
"""

#: kind -> (how the bad record is made, the reason it must be quarantined with)
BAD_KINDS: dict[str, tuple[Any, str]] = {
    "truncated": (lambda e: json.dumps(e)[:-7].encode(), "malformed_json"),
    "not_an_object": (lambda e: json.dumps([e["event_id"], e["amount"]]).encode(), "malformed_json"),
    "plain_text": (lambda e: f"event {e['event_id']} amount={e['amount']}".encode(), "malformed_json"),
    "wrong_type": (lambda e: json.dumps({**e, "amount": "twelve"}).encode(), "wrong_type:amount"),
    "missing_field": (lambda e: json.dumps({k: v for k, v in e.items() if k != "user_id"}).encode(),
                      "missing_field:user_id"),
    "bad_timestamp": (lambda e: json.dumps({**e, "event_time": "yesterday-ish"}).encode(),
                      "bad_timestamp:event_time"),
    "not_utf8": (lambda e: json.dumps(e).encode().replace(b'"u', b'"\xff\xfeu', 1), "not_utf8"),
    "oversize": (lambda e: json.dumps({**e, "padding": "x" * 5_000}).encode(), "oversize"),
    "overflow": (lambda e: json.dumps({**e, "quantity": 2**40}).encode(), "wrong_type:quantity"),
    "zero_length": (lambda e: b"", "empty_record"),
    "whitespace": (lambda e: b" \n\t ", "empty_record"),
    "tombstone": (lambda e: None, "empty_record"),
}


def good_event(i: int, rng: random.Random) -> dict[str, Any]:
    return {"event_id": f"e{i:06d}", "user_id": f"u{rng.randrange(5_000):04d}",
            "amount": round(rng.uniform(1, 500), 2), "quantity": rng.randrange(1, 2**31 - 1),
            "event_time": f"2026-11-21T10:{i % 60:02d}:00Z"}


def test_malformed_events_are_quarantined_with_their_reason_and_good_ones_kept_exactly(
        spark, kafka_bootstrap: str, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from deltaflow.dev.generator import produce
    from deltaflow.dev.topics import create_topic

    rng = random.Random(5)
    topic = f"bad-input-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, partitions=3)
    kinds = list(BAD_KINDS)
    sent: list[tuple[str, Any]] = []  # (kind or "good", event)
    payloads: list[bytes | None] = []
    for i in range(EVENTS):
        event = good_event(i, rng)
        kind = kinds[i % len(kinds)] if rng.random() < BAD_SHARE else "good"
        payloads.append(json.dumps(event).encode() if kind == "good" else BAD_KINDS[kind][0](event))
        sent.append((kind, event))
    produce(kafka_bootstrap, topic, payloads)
    bad = Counter(kind for kind, _ in sent if kind != "good")
    assert len(bad) == len(BAD_KINDS) and sum(bad.values()) > 0.04 * EVENTS

    project = Project(tmp_path / "p", PIPELINE.format(topic=topic), bootstrap=kafka_bootstrap)
    spec = load_spec(project.spec_path)
    outcomes = Pipeline(spec, spark=spark).run("available_now")
    assert {o.state for o in outcomes} == {"completed"}

    silver = DeltaTable(project.table("silver_events")).to_pyarrow_table().to_pylist()
    good = {e["event_id"]: e for kind, e in sent if kind == "good"}
    assert len(silver) == len(good) and {r["event_id"] for r in silver} == set(good)
    for row in silver[:2_000]:
        expected = good[row["event_id"]]
        assert (row["user_id"], row["amount"], row["quantity"]) == (
            expected["user_id"], expected["amount"], expected["quantity"])
        assert row["event_time"].isoformat().startswith(expected["event_time"][:16])
    assert "_df_failed" not in silver[0] and "_df_raw" not in silver[0]

    quarantine = DeltaTable(project.table("silver_events_quarantine")).to_pyarrow_table().to_pylist()
    assert len(quarantine) == sum(bad.values())
    positions = {(q["topic"], q["partition"], q["offset"]) for q in quarantine}
    assert len(positions) == len(quarantine) and {p[0] for p in positions} == {topic}
    reasons = Counter(q["failed_expectations"][0] for q in quarantine)
    expected_reasons: Counter[str] = Counter()
    for kind, count in bad.items():
        expected_reasons[BAD_KINDS[kind][1]] += count
    assert reasons == expected_reasons
    # the raw text as it came: null only for a null value (a tombstone), never the position as a record
    assert sorted(q["record"] is None for q in quarantine).count(True) == bad["tombstone"]
    assert all(q["record"] is not None for q in quarantine if q["failed_expectations"] != ["empty_record"])
    empty = {q["record"] for q in quarantine if "empty_record" in q["failed_expectations"]}
    assert empty == {None, "", " \n\t "}
    not_utf8 = [q for q in quarantine if "not_utf8" in q["failed_expectations"]]
    assert len(not_utf8) == bad["not_utf8"] and all(b"\xff\xfe" in q["record_bytes"] for q in not_utf8)

    # `deltaflow quarantine` (no JVM) counts the same rows by reason, with samples and their positions.
    shown = cli(capsys, "quarantine", "silver_events", "--json", "--spec", str(project.spec_path))
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["rows"] == len(quarantine)
    assert report["reasons"] == dict(Counter(r for q in quarantine for r in q["failed_expectations"]))
    assert all(s["topic"] == topic for samples in report["samples"].values() for s in samples)

    log = DeltaTable(project.layout.event_log).to_pyarrow_table().to_pylist()
    counts = [json.loads(e["expectations"]) for e in log
              if e["flow"] == "silver_events" and e["expectations"]]
    # rows in = rows out + rows quarantined + rows dropped, over every batch
    assert sum(c["_rows"] for c in counts) == EVENTS == len(silver) + len(quarantine) + sum(
        c["_dropped"] for c in counts)
    assert sum(c["_quarantined"] for c in counts) == sum(c["_unparsed"] for c in counts) == len(quarantine)
