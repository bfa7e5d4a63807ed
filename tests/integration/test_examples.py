"""The shipped examples (clickstream, orders, fraud), run from their real folders, bronze to gold.

Each test points the example's storage and landing folder at tmp_path (``DELTAFLOW_STORAGE``,
``DELTAFLOW_LANDING``) and runs it available-now against the session broker, then reads the tables back
with ``deltalake`` (no Spark) and checks them against an independent computation in Python. The
examples name their topics (``clicks``, ``transactions``), so other tests may have produced to them too:
assertions on rows look only at ids generated here, and gold is compared with a recomputation over the
whole silver table.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from deltaflow.pipeline import Pipeline
from deltaflow.storage import StorageLayout
from helpers import cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


# -- helpers ------------------------------------------------------------------------------------------------


def use_example(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bootstrap: str = "") -> Path:
    """The real example folder, with its storage and landing folders under tmp_path."""
    monkeypatch.setenv("DELTAFLOW_STORAGE", str(tmp_path / "storage"))
    monkeypatch.setenv("DELTAFLOW_LANDING", str(tmp_path / "landing"))
    if bootstrap:
        monkeypatch.setenv("DELTAFLOW_KAFKA", bootstrap)
    return EXAMPLES / name


def run_example(spark: Any, folder: Path) -> None:
    outcomes = Pipeline.load(folder, spark=spark).run("available_now")
    assert {o.flow: o.state for o in outcomes} == {o.flow: "completed" for o in outcomes}


def rows(tmp_path: Path, table: str) -> list[dict[str, Any]]:
    return DeltaTable(StorageLayout(str(tmp_path / "storage")).table(table)).to_pyarrow_table().to_pylist()


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def floor(at: datetime, step: timedelta) -> datetime:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return epoch + (at - epoch) // step * step


def assert_same_aggregates(actual: dict[Any, tuple[Any, ...]], expected: dict[Any, tuple[Any, ...]]) -> None:
    assert actual.keys() == expected.keys()
    for key, values in expected.items():
        assert actual[key] == pytest.approx(values, rel=1e-9, abs=1e-6), key


def write_lines(folder: Path, name: str, lines: Iterable[str]) -> None:
    tmp = folder / f".{name}"  # hidden from the file source until renamed
    tmp.write_text("".join(f"{line}\n" for line in lines))
    tmp.rename(folder / name)


# -- clickstream --------------------------------------------------------------------------------------------


def hourly_metrics(events: Iterable[dict[str, Any]]) -> dict[Any, tuple[int, int, float]]:
    """gold_hourly_product_metrics, computed in Python: (hour, product) -> views, unique users, revenue."""
    groups: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        groups[(floor(e["event_timestamp"], timedelta(hours=1)), e["product_id"])].append(e)
    return {key: (len(g), len({e["user_id"] for e in g}), sum(e["revenue"] for e in g))
            for key, g in groups.items()}


def test_clickstream_gold_equals_a_batch_recomputation(spark, kafka_bootstrap, tmp_path, monkeypatch) -> None:
    from deltaflow.dev.generator import clickstream_event, produce, user_key
    from deltaflow.dev.topics import create_topic

    folder = use_example("clickstream", tmp_path, monkeypatch, kafka_bootstrap)
    create_topic(kafka_bootstrap, "clicks", partitions=3)
    rng = random.Random(11)
    # Half past the hour, so that every hour the assertions below expect holds events whatever the clock says:
    # from "now", the last three hours reach 30 minutes into hour -3, the next hour 30 minutes into hour +1.
    now = floor(datetime.now(UTC), timedelta(hours=1)) + timedelta(minutes=30)

    def events(start: timedelta, end: timedelta, count: int) -> list[dict[str, Any]]:
        span = (end - start).total_seconds()
        return [clickstream_event(rng, now + start + timedelta(seconds=rng.uniform(0, span)))
                for _ in range(count)]

    # Run 1: the last three hours, some users viewing a product again (unique_users < view_count).
    # Run 2: the next hour, after silver's 10-minute watermark whatever else is in the topic (so nothing is
    # late), plus events resent from run 1 (dropped); the hours before must stay as they are.
    first = events(-timedelta(hours=3), timedelta(0), 300)
    again = [{**e, "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4))} for e in first[:30]]
    produce(kafka_bootstrap, "clicks", [*first, *again, *first[:10]], user_key)
    produce(kafka_bootstrap, "clicks", [b"not json", b'{"event_id": "x"}'])  # no type, no user: filtered
    run_example(spark, folder)
    second = events(timedelta(minutes=1), timedelta(hours=1), 150)
    resent = [e for e in first if ts(e["event_timestamp"]) > now - timedelta(minutes=5)][:5]
    produce(kafka_bootstrap, "clicks", [*second, *resent], user_key)
    run_example(spark, folder)

    silver = rows(tmp_path, "silver_clicks")
    ours = {e["event_id"]: e for e in [*first, *again, *second]}
    counts = Counter(r["event_id"] for r in silver if r["event_id"] in ours)
    assert counts == Counter(dict.fromkeys(ours, 1)), "each generated event in silver exactly once"
    assert all(r["user_id"] is not None and r["event_type"] is not None for r in silver)
    # Silver parsed our events faithfully: its aggregates over them equal those over what was produced.
    produced = [{**e, "event_timestamp": ts(e["event_timestamp"])} for e in ours.values()]
    assert_same_aggregates(hourly_metrics(r for r in silver if r["event_id"] in ours),
                           hourly_metrics(produced))

    gold = {(r["window"]["start"], r["product_id"]): (r["view_count"], r["unique_users"], r["total_revenue"])
            for r in rows(tmp_path, "gold_hourly_product_metrics")}
    expected = hourly_metrics(silver)
    hour = floor(now, timedelta(hours=1))
    assert {start for start, _ in expected} >= {hour + timedelta(hours=h) for h in range(-3, 2)}
    assert_same_aggregates(gold, expected)
    assert any(users < views for views, users, _ in gold.values())  # distinct, not a count


# -- orders -------------------------------------------------------------------------------------------------


def daily_sales(orders: Iterable[dict[str, Any]]) -> dict[Any, tuple[int, float, float]]:
    """gold_daily_sales, computed in Python: (day, category) -> orders, revenue, average order value."""
    groups: dict[Any, list[float]] = defaultdict(list)
    for o in orders:
        groups[(floor(o["order_timestamp"], timedelta(days=1)), o["product_category"])].append(o["amount"])
    return {key: (len(a), sum(a), sum(a) / len(a)) for key, a in groups.items()}


def test_orders_silver_is_clean_and_gold_exact(spark, tmp_path, monkeypatch) -> None:
    from deltaflow.dev.sample_data import order_events, write_json_lines

    folder = use_example("orders", tmp_path, monkeypatch)
    landing = tmp_path / "landing" / "orders"
    landing.mkdir(parents=True)
    rng = random.Random(5)
    day0 = floor(datetime.now(UTC), timedelta(days=1)) - timedelta(days=1)

    def files(hours: list[float], per_file: int) -> list[list[dict[str, Any]]]:
        return [order_events(rng, day0 + timedelta(hours=h), per_file, invalid_share=0.1) for h in hours]

    # Run 1 spans two days, from 06:00 to about 06:00 the next day.
    first = files([6, 10, 14, 18, 22, 26, 30], 40)
    for i, orders in enumerate(first):
        write_json_lines(landing, f"run1-{i}.json", orders)
    write_lines(landing, "run1-bad.json", ['not json', '{"order_id": "o-bad", "amount": "ten"}'])
    run_example(spark, folder)

    sent1 = [o for f in first for o in f]
    # Silver's watermark is now a day behind the newest valid order: ids newer than it are remembered
    # (resent orders are dropped), older orders are too late (dropped as well).
    watermark = max(ts(o["order_timestamp"]) for o in sent1 if o["order_id"] and o["amount"] > 0) - timedelta(
        days=1)
    second = files([12, 20, 28, 34], 40)
    resent = [dict(o) for o in sent1 if o["order_id"] and o["amount"] > 0
              and ts(o["order_timestamp"]) > watermark + timedelta(minutes=1)][:15]
    late = order_events(rng, watermark - timedelta(hours=2), 1, invalid_share=0)
    for i, orders in enumerate(second):
        write_json_lines(landing, f"run2-{i}.json", orders)
    write_json_lines(landing, "run2-resent.json", [*resent, *late])
    run_example(spark, folder)

    sent = [o for o in [*sent1, *(o for f in second for o in f)] if o["order_id"] and o["amount"] > 0]
    kinds = Counter("null id" if not o["order_id"] else "amount <= 0" if o["amount"] <= 0 else "ok"
                    for f in [*first, *second] for o in f)
    assert kinds["null id"] and kinds["amount <= 0"] and len(sent) > len({o["order_id"] for o in sent})
    expected_silver = {o["order_id"]: {**o, "order_timestamp": ts(o["order_timestamp"])} for o in sent}

    silver = rows(tmp_path, "silver_orders")
    ids = [r["order_id"] for r in silver]
    assert None not in ids and all(r["amount"] > 0 for r in silver)
    assert len(ids) == len(set(ids)), "each order_id at most once"
    assert set(ids) == set(expected_silver), "every valid order, and nothing else"
    assert late[0]["order_id"] not in ids
    for r in silver:
        want = expected_silver[r["order_id"]]
        assert (r["amount"], r["product_category"], r["order_timestamp"], r["order_date"]) == (
            want["amount"], want["product_category"], want["order_timestamp"], want["order_timestamp"].date())

    gold = {(r["window"]["start"], r["product_category"]):
            (r["order_count"], r["total_revenue"], r["avg_order_value"])
            for r in rows(tmp_path, "gold_daily_sales")}
    assert {day for day, _ in gold} == {day0, day0 + timedelta(days=1)}
    assert_same_aggregates(gold, daily_sales(silver))
    assert_same_aggregates(gold, daily_sales(expected_silver.values()))


# -- fraud --------------------------------------------------------------------------------------------------


def customer(cid: str, risk: float, age: int, avg: float, at: datetime) -> dict[str, Any]:
    return {"customer_id": cid, "risk_score": risk, "account_age_days": age, "avg_transaction_amount": avg,
            "updated_at": at.isoformat(timespec="milliseconds").replace("+00:00", "Z")}


def latest(updates: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The customer dimension, computed in Python: the row with the newest updated_at per customer."""
    dimension: dict[str, dict[str, Any]] = {}
    for c in updates:
        held = dimension.get(c["customer_id"])
        if held is None or ts(c["updated_at"]) > ts(held["updated_at"]):
            dimension[c["customer_id"]] = c
    return dimension


def suspicious(tx: dict[str, Any], dimension: dict[str, dict[str, Any]]) -> bool:
    """The seed's three rules, in Python; a customer missing from the dimension is not suspicious."""
    c = dimension.get(tx["customer_id"])
    if c is None:
        return False
    return (tx["amount"] > c["avg_transaction_amount"] * 5 or c["risk_score"] > 0.8
            or (c["account_age_days"] < 30 and tx["amount"] > 1000))


def test_fraud_flags_with_the_dimension_as_of_each_run(spark, kafka_bootstrap, tmp_path, monkeypatch) -> None:
    from deltaflow.dev.generator import produce
    from deltaflow.dev.sample_data import customer_key, customer_records, transaction_event, write_json_lines
    from deltaflow.dev.topics import create_topic

    folder = use_example("fraud", tmp_path, monkeypatch, kafka_bootstrap)
    landing = tmp_path / "landing" / "customers"
    landing.mkdir(parents=True)
    create_topic(kafka_bootstrap, "transactions", partitions=3)
    rng, run_id = random.Random(23), uuid.uuid4().hex[:8]
    t0 = datetime.now(UTC) - timedelta(hours=1)

    generated = customer_records(rng, t0, 60)
    known = [
        customer("c-high", 0.9, 400, 100.0, t0),        # risky: every transaction is suspicious
        customer("c-low", 0.1, 400, 100.0, t0),
        customer("c-low", 0.95, 400, 100.0, t0 - timedelta(days=3)),  # an older row: must not win
        customer("c-spike", 0.2, 500, 50.0, t0),        # 300 > 5 x 50
        customer("c-new", 0.1, 10, 1000.0, t0),         # 10-day-old account, 1500 > 1000
    ]
    write_json_lines(landing, "customers-1.json", [*generated, *known])

    def tx(name: str, cid: str, amount: float) -> dict[str, Any]:
        return {"transaction_id": f"{run_id}-{name}", "customer_id": cid, "amount": amount,
                "merchant": "Test Shop", "tx_timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z")}

    bulk1 = [{**transaction_event(rng, t0, generated), "transaction_id": f"{run_id}-g1-{i}"}
             for i in range(150)]
    first = [tx("high-1", "c-high", 20.0), tx("low-1", "c-low", 20.0), tx("spike-1", "c-spike", 300.0),
             tx("new-1", "c-new", 1500.0), tx("unknown-1", "c-nobody", 1_000_000.0), *bulk1]
    produce(kafka_bootstrap, "transactions", first, customer_key)
    produce(kafka_bootstrap, "transactions", [b"not json"])
    run_example(spark, folder)

    dim1 = latest([*generated, *known])
    silver1 = {r["transaction_id"]: r for r in rows(tmp_path, "silver_transactions")}
    for t in first:
        r = silver1[t["transaction_id"]]
        assert r["is_suspicious"] is suspicious(t, dim1), t
        assert r["risk_score"] == (dim1[t["customer_id"]]["risk_score"] if t["customer_id"] in dim1 else None)
    assert silver1[f"{run_id}-low-1"]["risk_score"] == 0.1  # the latest row by updated_at, not the last one

    # Updates: c-high calms down, c-low turns risky; an update older than c-spike's row changes nothing.
    t1 = t0 + timedelta(minutes=30)
    updates = [customer("c-high", 0.2, 400, 100.0, t1), customer("c-low", 0.95, 400, 100.0, t1),
               customer("c-spike", 0.2, 500, 5000.0, t0 - timedelta(minutes=1))]
    write_json_lines(landing, "customers-2.json", updates)
    bulk2 = [{**transaction_event(rng, t1, generated), "transaction_id": f"{run_id}-g2-{i}"}
             for i in range(100)]
    second = [tx("high-2", "c-high", 20.0), tx("low-2", "c-low", 20.0), tx("spike-2", "c-spike", 300.0),
              *bulk2]
    produce(kafka_bootstrap, "transactions", second, customer_key)
    run_example(spark, folder)

    dim2 = latest([*generated, *known, *updates])
    customers = {r["customer_id"]: r for r in rows(tmp_path, "customers")}
    assert (customers["c-high"]["risk_score"], customers["c-low"]["risk_score"]) == (0.2, 0.95)
    assert customers["c-spike"]["avg_transaction_amount"] == 50.0
    assert {cid: (r["risk_score"], r["account_age_days"], r["avg_transaction_amount"], r["updated_at"])
            for cid, r in customers.items()} == {
        cid: (c["risk_score"], c["account_age_days"], c["avg_transaction_amount"], ts(c["updated_at"]))
        for cid, c in dim2.items()}

    silver = {r["transaction_id"]: r for r in rows(tmp_path, "silver_transactions")}
    flags = {t["transaction_id"]: suspicious(t, dim1) for t in first}
    flags |= {t["transaction_id"]: suspicious(t, dim2) for t in second}
    assert {i: silver[i]["is_suspicious"] for i in flags} == flags
    assert [silver[f"{run_id}-{n}"]["risk_score"] for n in ("high-1", "high-2", "low-1", "low-2")] == [
        0.9, 0.2, 0.1, 0.95]  # earlier transactions keep the values they were flagged with
    assert flags[f"{run_id}-high-1"] and not flags[f"{run_id}-high-2"]
    assert not flags[f"{run_id}-low-1"] and flags[f"{run_id}-low-2"]
    assert flags[f"{run_id}-spike-2"] and flags[f"{run_id}-new-1"] and not flags[f"{run_id}-unknown-1"]
    assert 0 < sum(flags.values()) < len(flags)

    alerts = [r for r in rows(tmp_path, "fraud_alerts") if r["transaction_id"] in flags]
    assert Counter(r["transaction_id"] for r in alerts) == Counter(i for i, s in flags.items() if s)
    reasons = {r["transaction_id"]: r["suspicion_reasons"] for r in alerts}
    assert reasons[f"{run_id}-high-1"] == "risk score > 0.8"
    assert reasons[f"{run_id}-new-1"] == "new account, amount > 1000"
    assert reasons[f"{run_id}-spike-1"] == "amount > 5x average"
    assert all(reasons.values())


# -- the demo command ---------------------------------------------------------------------------------------


def test_demo_with_an_unknown_example_is_one_line_listing_the_examples(capsys) -> None:  # type: ignore[no-untyped-def]
    proc = cli(capsys, "demo", "--example", "nope")
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "nope" in lines[0] and all(name in lines[0] for name in ("clickstream", "orders", "fraud"))
    assert proc.stdout == ""
