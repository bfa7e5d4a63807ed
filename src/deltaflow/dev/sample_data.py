"""Example data for the fraud and orders pipelines, reproducible with a seed.

- fraud (``examples/fraud``): :func:`transaction_event` for the ``transactions`` topic (produced by
  :class:`deltaflow.dev.generator.EventGenerator`) and :func:`customer_records` /
  :func:`customer_update` for the customer dimension's files;
- orders (``examples/orders``): :func:`order_events`, a few percent of them invalid on purpose, dropped
  into a landing folder by :class:`FileFeeder` (files appear atomically, see :func:`write_json_lines`);
- customers_cdc (``examples/customers_cdc``): :func:`customer_changes`, a change log of inserts, updates
  and deletes as it arrives from a CDC tool: out of order, with duplicates.

Examples:
    >>> rows = customer_records(random.Random(1), datetime(2025, 5, 1, tzinfo=UTC), 2)
    >>> [r["customer_id"] for r in rows]
    ['c00000', 'c00001']

"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from deltaflow.dev.generator import MAX_LAG_MS, field_key

RecordsFn = Callable[[random.Random, datetime], list[dict[str, Any]]]


def _iso(at: datetime) -> str:
    """``at`` as ISO-8601 UTC with milliseconds and a ``Z`` (what Spark's JSON reader parses as TIMESTAMP)."""
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _utc(now: datetime) -> datetime:
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


# -- fraud: customers (the dimension) and their transactions ----------------------------------------------

MERCHANTS = (
    "Amazon", "Walmart", "Target", "Costco", "Shell", "Starbucks", "Uber", "Apple Store", "Best Buy",
    "Home Depot", "Netflix", "Airbnb", "Delta Air Lines", "IKEA", "Zara", "Steam", "Local Grocer",
)
_NEW_ACCOUNT_SHARE = 0.05    # account younger than 30 days
_HIGH_RISK_SHARE = 0.03      # risk score above 0.8
_SPIKE_SHARE = 0.01          # a transaction far above the customer's usual amount
_UNKNOWN_CUSTOMER_SHARE = 0.02


def customer_id(number: int) -> str:
    """The id of customer ``number``, as :func:`customer_records` numbers them.

    Examples:
        >>> customer_id(42)
        'c00042'

    """
    return f"c{number:05d}"


def customer_update(rng: random.Random, customer: str, now: datetime) -> dict[str, Any]:
    """One row of the customer dimension (a new customer, or a new state of one), drawn from ``rng``.

    Risk scores are mostly low (about 3 % of customers above 0.8), about 5 % of accounts are younger than
    30 days, usual amounts are log-normal around 80.

    Args:
        rng: Source of randomness.
        customer: The customer's id (see :func:`customer_id`).
        now: When the row was updated; a naive datetime is taken as UTC.

    Returns:
        ``customer_id``, ``risk_score`` (0-1), ``account_age_days``, ``avg_transaction_amount`` and
        ``updated_at`` (ISO-8601 UTC).

    Examples:
        >>> row = customer_update(random.Random(3), "c00007", datetime(2025, 5, 1, tzinfo=UTC))
        >>> 0 <= row["risk_score"] <= 1 and row["updated_at"]
        '2025-05-01T00:00:00.000Z'

    """
    high_risk = rng.random() < _HIGH_RISK_SHARE
    risk = rng.uniform(0.81, 0.99) if high_risk else rng.betavariate(2, 8)
    age = rng.randrange(1, 30) if rng.random() < _NEW_ACCOUNT_SHARE else rng.randrange(30, 3650)
    return {
        "customer_id": customer,
        "risk_score": round(risk, 3),
        "account_age_days": age,
        "avg_transaction_amount": round(max(5.0, rng.lognormvariate(4.4, 0.6)), 2),
        "updated_at": _iso(_utc(now)),
    }


def customer_records(rng: random.Random, now: datetime, count: int) -> list[dict[str, Any]]:
    """The customer dimension's first rows: customers ``c00000`` .. ``customer_id(count - 1)``.

    Examples:
        >>> rows = customer_records(random.Random(1), datetime(2025, 5, 1, tzinfo=UTC), 3)
        >>> [r["customer_id"] for r in rows]
        ['c00000', 'c00001', 'c00002']

    """
    return [customer_update(rng, customer_id(n), now) for n in range(count)]


def transaction_event(
    rng: random.Random, now: datetime, customers: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """One card transaction of a customer drawn from ``customers`` (rows of :func:`customer_records`).

    Amounts are log-normal around the customer's ``avg_transaction_amount``; about 1 % are spikes of 6 to
    20 times it, and about 2 % come from a customer missing from ``customers`` (a card issued since the
    dimension was loaded). The timestamp is ``now`` minus up to two seconds of lag.

    Args:
        rng: Source of randomness.
        now: Current time; a naive datetime is taken as UTC.
        customers: Rows with ``customer_id`` and ``avg_transaction_amount``; may be empty.

    Returns:
        ``transaction_id``, ``customer_id``, ``amount``, ``merchant`` and ``tx_timestamp``.

    Examples:
        >>> customers = customer_records(random.Random(1), datetime(2025, 5, 1, tzinfo=UTC), 10)
        >>> tx = transaction_event(random.Random(2), datetime(2025, 5, 1, 12, tzinfo=UTC), customers)
        >>> sorted(tx)
        ['amount', 'customer_id', 'merchant', 'transaction_id', 'tx_timestamp']

    """
    if customers and rng.random() >= _UNKNOWN_CUSTOMER_SHARE:
        customer = customers[rng.randrange(len(customers))]
        who, usual = str(customer["customer_id"]), float(customer["avg_transaction_amount"])
    else:
        who, usual = f"c{rng.randrange(10**6, 10**7)}", 80.0  # 7 digits: never a known customer
    spike = rng.random() < _SPIKE_SHARE
    amount = usual * (rng.uniform(6, 20) if spike else rng.lognormvariate(0, 0.5))
    return {
        "transaction_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "customer_id": who,
        "amount": round(max(0.5, amount), 2),
        "merchant": rng.choice(MERCHANTS),
        "tx_timestamp": _iso(_utc(now) - timedelta(milliseconds=rng.randrange(MAX_LAG_MS))),
    }


#: Key transactions by ``customer_id`` (one customer's transactions stay in order).
customer_key = field_key("customer_id")


# -- orders: JSON files, a few of them invalid -------------------------------------------------------------

PRODUCT_CATEGORIES = ("electronics", "fashion", "home", "beauty", "books", "sports", "toys", "grocery")
_CATEGORY_WEIGHTS = (18, 22, 15, 12, 9, 10, 6, 8)
_CATEGORY_PRICE = {  # (mu, sigma) of the log-normal order amount
    "electronics": (5.2, 0.8), "fashion": (4.0, 0.6), "home": (4.3, 0.7), "beauty": (3.4, 0.5),
    "books": (3.0, 0.4), "sports": (4.1, 0.7), "toys": (3.5, 0.5), "grocery": (3.6, 0.5),
}
INVALID_KINDS = ("null_order_id", "non_positive_amount", "duplicate")


def order_event(rng: random.Random, now: datetime) -> dict[str, Any]:
    """One valid order, drawn from ``rng`` (same seed, same orders).

    Args:
        rng: Source of randomness.
        now: Current time; a naive datetime is taken as UTC. The order is up to five seconds older.

    Returns:
        ``order_id``, ``customer_id``, ``product_category``, ``amount`` (> 0) and ``order_timestamp``.

    Examples:
        >>> order = order_event(random.Random(5), datetime(2025, 5, 1, tzinfo=UTC))
        >>> order["amount"] > 0 and order["product_category"] in PRODUCT_CATEGORIES
        True

    """
    category = rng.choices(PRODUCT_CATEGORIES, _CATEGORY_WEIGHTS)[0]
    mu, sigma = _CATEGORY_PRICE[category]
    return {
        "order_id": f"o-{rng.getrandbits(64):016x}",
        "customer_id": customer_id(rng.randrange(50_000)),
        "product_category": category,
        "amount": round(max(0.99, rng.lognormvariate(mu, sigma)), 2),
        "order_timestamp": _iso(_utc(now) - timedelta(milliseconds=rng.randrange(5_000))),
    }


def order_events(
    rng: random.Random, now: datetime, count: int, invalid_share: float = 0.05
) -> list[dict[str, Any]]:
    """``count`` orders as they arrive from the shop: about ``invalid_share`` of them are bad on purpose.

    Bad records are, in equal parts, an order without ``order_id``, an order with an ``amount`` of zero or
    less, and an exact copy of an earlier order of the list (a resent order). The rest are
    :func:`order_event`.

    Args:
        rng: Source of randomness.
        now: Current time; a naive datetime is taken as UTC.
        count: How many records.
        invalid_share: Probability that a record is bad (0 for none).

    Examples:
        >>> orders = order_events(random.Random(9), datetime(2025, 5, 1, tzinfo=UTC), 400)
        >>> valid = {o["order_id"] for o in orders if o["order_id"] and o["amount"] > 0}
        >>> len(orders), 300 < len(valid) < 400
        (400, True)

    """
    orders: list[dict[str, Any]] = []
    for _ in range(count):
        kind = rng.choice(INVALID_KINDS) if rng.random() < invalid_share else None
        if kind == "duplicate" and orders:
            orders.append(dict(orders[rng.randrange(len(orders))]))
            continue
        order = order_event(rng, now)
        if kind == "null_order_id":
            order["order_id"] = None
        elif kind == "non_positive_amount":
            order["amount"] = -order["amount"] if rng.random() < 0.5 else 0.0
        orders.append(order)
    return orders


def write_json_lines(folder: Path | str, name: str, records: Iterable[Mapping[str, Any]]) -> Path:
    """Write ``records`` as one JSON object per line to ``folder/name``, atomically.

    The file is written under a hidden name (Spark's file source skips names starting with ``.``) and then
    renamed, so a streaming reader never sees it half written.

    Returns:
        The file's path.

    Examples:
        >>> import tempfile
        >>> path = write_json_lines(tempfile.mkdtemp(), "orders-1.json", [{"order_id": "o1"}])
        >>> path.read_text().splitlines()
        ['{"order_id":"o1"}']

    """
    target = Path(folder) / name
    tmp = target.with_name(f".{name}.tmp")
    with tmp.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, separators=(",", ":")))
            out.write("\n")
    os.replace(tmp, target)
    return target


class FileFeeder(threading.Thread):
    """A daemon thread dropping a JSON-lines file of generated records into ``folder`` every ``interval`` s.

    Each file holds ``make_records(rng, now)`` and is named ``<prefix>-<UTC time>-<n>.json``; files appear
    atomically (see :func:`write_json_lines`). The thread ends when :meth:`stop` is called or after
    ``max_files``.

    Args:
        folder: The landing folder (created if missing).
        make_records: Draws one file's records from ``(rng, now)``.
        interval: Seconds between files.
        prefix: File name prefix.
        max_files: Stop after this many files (None: run until :meth:`stop`).
        seed: Seed of the randomness (None: random).

    Attributes:
        produced: Records written so far.
        files: Files written so far.
        error: The exception that ended the thread, if any.

    Examples:
        >>> feeder = FileFeeder("landing/orders", lambda rng, now: order_events(rng, now, 1000),
        ...                     prefix="orders")  # doctest: +SKIP
        >>> feeder.start(); ...; feeder.stop(); feeder.join()  # doctest: +SKIP

    """

    def __init__(
        self, folder: Path | str, make_records: RecordsFn, interval: float = 1.0, prefix: str = "batch",
        max_files: int | None = None, seed: int | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        super().__init__(name=f"file-feeder-{prefix}", daemon=True)
        self.folder = Path(folder)
        self.make_records = make_records
        self.interval = interval
        self.prefix = prefix
        self.max_files = max_files
        self.produced = 0
        self.files = 0
        self.error: BaseException | None = None
        self._rng = random.Random(seed)
        self._stopping = threading.Event()

    def stop(self) -> None:
        """Ask the thread to finish after the file it is writing; join it to wait."""
        self._stopping.set()

    def run(self) -> None:
        """Write files until stopped or ``max_files`` are written (called by :meth:`start`)."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            next_at = time.monotonic()
            while not self._stopping.is_set() and (self.max_files is None or self.files < self.max_files):
                now = datetime.now(UTC)
                records = self.make_records(self._rng, now)
                name = f"{self.prefix}-{now:%Y%m%dT%H%M%S%f}-{self.files:06d}.json"
                write_json_lines(self.folder, name, records)
                self.files += 1
                self.produced += len(records)
                next_at += self.interval
                self._stopping.wait(max(0.0, next_at - time.monotonic()))
        except BaseException as exc:  # kept for the caller, a thread cannot raise to it
            self.error = exc


CHANGE_OPS = ("INSERT", "UPDATE", "DELETE")
_TIERS = ("bronze", "silver", "gold", "platinum")
_CITIES = ("Oslo", "Lisbon", "Austin", "Pune", "Lagos", "Osaka", "Quito", "Turin")


def customer_changes(
    customers: int = 200, events: int = 2_000, *, seed: int = 7, start_seq: int = 1,
    disorder: int = 20, duplicates: float = 0.05, delete_share: float = 0.08,
) -> list[dict[str, Any]]:
    """A CDC change log of ``events`` events for ``customers`` customers, in *arrival* order.

    Each event has ``customer_id``, ``op`` (INSERT, UPDATE or DELETE), ``seq`` (the source's commit order,
    unique and increasing from ``start_seq``), ``name``, ``email``, ``tier``, ``city`` and ``updated_at``;
    a delete carries the key and sequence only, as CDC tools send them. Arrival order differs from ``seq``:
    each event arrives up to ``disorder`` positions early or late (so a delete may arrive before the insert
    it follows), and a share ``duplicates`` of events arrives a second time, later.

    Examples:
        >>> log = customer_changes(50, 400, seed=1)
        >>> len(log) > 400, len({e["seq"] for e in log})  # duplicates arrive, every seq at least once
        (True, 400)

    """
    rng = random.Random(seed)
    alive: set[str] = set()
    log: list[dict[str, Any]] = []
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for seq in range(start_seq, start_seq + events):
        customer = f"cust-{rng.randrange(customers):05d}"
        op = "INSERT" if customer not in alive else ("DELETE" if rng.random() < delete_share else "UPDATE")
        event: dict[str, Any] = {"customer_id": customer, "op": op, "seq": seq, "name": None,
                                 "email": None, "tier": None, "city": None,
                                 "updated_at": _iso(start + timedelta(seconds=seq))}
        if op == "DELETE":
            alive.discard(customer)
        else:
            alive.add(customer)
            number = int(customer.split("-")[1])
            event.update(name=f"Customer {number}", email=f"c{number}.{seq}@example.com",
                         tier=rng.choice(_TIERS), city=rng.choice(_CITIES))
        log.append(event)
    arrival = sorted(log, key=lambda e: e["seq"] + rng.uniform(-disorder, disorder))
    # (position, copy?, event): a copy goes anywhere from its original's place to the end, after it
    placed = [(float(i), False, e) for i, e in enumerate(arrival)]
    placed += [(rng.uniform(i, len(arrival)), True, dict(e)) for i, e in enumerate(arrival)
               if rng.random() < duplicates]
    placed.sort(key=lambda p: p[:2])
    return [event for _, _, event in placed]


class CustomerChangeFeed:
    """An endless :func:`customer_changes` log, one event per call: ``make_event`` for an EventGenerator.

    Examples:
        >>> feed = CustomerChangeFeed(customers=10, chunk=50)
        >>> sorted({feed(random.Random(1), datetime.now(UTC))["op"] for _ in range(200)})
        ['DELETE', 'INSERT', 'UPDATE']

    """

    def __init__(self, customers: int = 2_000, chunk: int = 1_000) -> None:
        self.customers = customers
        self.chunk = chunk
        self._pending: list[dict[str, Any]] = []
        self._next_seq = 1

    def __call__(self, rng: random.Random, now: datetime) -> dict[str, Any]:
        """The next change event (``now`` is unused: the events carry their own ``updated_at``)."""
        if not self._pending:
            self._pending = customer_changes(self.customers, self.chunk, seed=rng.randrange(2**31),
                                             start_seq=self._next_seq)[::-1]
            self._next_seq += self.chunk
        return self._pending.pop()
