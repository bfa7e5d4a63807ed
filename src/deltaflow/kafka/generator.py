"""Realistic example data, produced to Kafka (once, or at a steady rate) or dropped as JSON-lines files.

The shipped examples each have a generator, all reproducible with a seed:

- clickstream (``examples/clickstream``): :func:`clickstream_event`, produced by :class:`EventGenerator`;
- fraud (``examples/fraud``): :func:`transaction_event` for the ``transactions`` topic and
  :func:`customer_records` / :func:`customer_update` for the customer dimension's files;
- orders (``examples/orders``): :func:`order_events`, a few percent of them invalid on purpose, dropped
  into a landing folder by :class:`FileFeeder` (files appear atomically, see :func:`write_json_lines`).

A clickstream event serialises (compact JSON) to about 250 bytes::

    {"event_id":"67a9c378-7c65-41e5-82e2-e662f728b4fa","user_id":"u012623","product_id":"p00838",
     "event_type":"view","event_timestamp":"2025-05-01T12:00:00.616Z","revenue":0.0,
     "session_id":"3c524465fb2f","page":"/product/p00838","user_agent":"Chrome/126 Windows"}

Example:
    >>> import random
    >>> from datetime import datetime, timezone
    >>> event = clickstream_event(random.Random(7), datetime(2025, 5, 1, tzinfo=timezone.utc))
    >>> event["event_type"] in EVENT_TYPES
    True

"""

from __future__ import annotations

import hashlib
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

from confluent_kafka import KafkaError, Producer

from deltaflow.errors import SourceError
from deltaflow.kafka.admin import QUIET

Event = bytes | dict[str, Any]
KeyFn = Callable[[Event], str | bytes | None]
EventFn = Callable[[random.Random, datetime], Event]
RecordsFn = Callable[[random.Random, datetime], list[dict[str, Any]]]

EVENT_TYPES = ("view", "add_to_cart", "purchase")
_WEIGHTS = (0.82, 0.13, 0.05)
_USERS = 20_000
_PRODUCTS = 5_000
_SESSION_SECONDS = 1800
_MAX_LAG_MS = 2_000
_USER_AGENTS = (  # (weight, browser/version platform)
    ("Safari/17.5 iOS", 30), ("Chrome/126 Android", 28), ("Chrome/126 Windows", 22),
    ("Safari/17.5 macOS", 10), ("Edge/126 Windows", 6), ("Firefox/127 Linux", 4),
)
_AGENT_NAMES = tuple(name for name, _ in _USER_AGENTS)
_AGENT_WEIGHTS = tuple(weight for _, weight in _USER_AGENTS)
_PAGES = {"view": "/product/{product}", "add_to_cart": "/cart", "purchase": "/checkout"}


def clickstream_event(rng: random.Random, now: datetime) -> dict[str, Any]:
    """One clickstream event as a dict, drawn from ``rng`` (same seed, same events).

    Users are uniform, products skewed (a few are popular); about 82 % views, 13 % add-to-cart and 5 %
    purchases, only purchases carry revenue. The timestamp is ``now`` minus up to two seconds of lag.

    Args:
        rng: Source of randomness.
        now: Current time; a naive datetime is taken as UTC.

    Returns:
        ``event_id``, ``user_id``, ``product_id``, ``event_type``, ``event_timestamp`` (ISO-8601 UTC with
        milliseconds), ``revenue``, ``session_id``, ``page`` and ``user_agent``.

    Example:
        >>> e = clickstream_event(random.Random(1), datetime(2025, 5, 1, tzinfo=UTC))
        >>> e["revenue"] > 0 if e["event_type"] == "purchase" else e["revenue"] == 0.0
        True

    """
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    user = f"u{rng.randrange(_USERS):06d}"
    rank = min(int((rng.paretovariate(1.0) - 1) * 50), _PRODUCTS - 1)  # Zipf-like popularity
    product = f"p{rank * 7919 % _PRODUCTS:05d}"
    event_type = rng.choices(EVENT_TYPES, _WEIGHTS)[0]
    at = now - timedelta(milliseconds=rng.randrange(_MAX_LAG_MS))
    revenue = round(max(0.99, rng.lognormvariate(3.4, 0.9)), 2) if event_type == "purchase" else 0.0
    session_key = f"{user}:{int(at.timestamp()) // _SESSION_SECONDS}".encode()
    return {
        "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "user_id": user,
        "product_id": product,
        "event_type": event_type,
        "event_timestamp": at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "revenue": revenue,
        "session_id": hashlib.blake2b(session_key, digest_size=6).hexdigest(),
        "page": _PAGES[event_type].format(product=product),
        "user_agent": rng.choices(_AGENT_NAMES, _AGENT_WEIGHTS)[0],
    }


def encode_event(event: Event) -> bytes:
    """The Kafka value of ``event``: bytes as they are, a dict as compact UTF-8 JSON.

    Example:
        >>> encode_event({"a": 1})
        b'{"a":1}'

    """
    if isinstance(event, bytes):
        return event
    return json.dumps(event, separators=(",", ":")).encode()


def user_key(event: Event) -> str | bytes | None:
    """Key an event by its ``user_id`` (so one user's events stay in order on one partition).

    Example:
        >>> user_key({"user_id": "u000042"})
        'u000042'

    """
    if isinstance(event, bytes):
        event = json.loads(event)
    value = event.get("user_id") if isinstance(event, dict) else None
    return None if value is None else str(value)


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

    Example:
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

    Example:
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

    Example:
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

    Example:
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
        "tx_timestamp": _iso(_utc(now) - timedelta(milliseconds=rng.randrange(_MAX_LAG_MS))),
    }


def customer_key(event: Event) -> str | bytes | None:
    """Key a transaction by its ``customer_id`` (one customer's transactions stay in order).

    Example:
        >>> customer_key({"customer_id": "c00042"})
        'c00042'

    """
    if isinstance(event, bytes):
        event = json.loads(event)
    value = event.get("customer_id") if isinstance(event, dict) else None
    return None if value is None else str(value)


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

    Example:
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

    Example:
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

    Example:
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


def _producer(bootstrap: str, timeout: float) -> Producer:
    return Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "message.timeout.ms": int(timeout * 1000),
        **QUIET,
    })


class _Delivery:
    """Counts acknowledged messages and keeps the first delivery error."""

    def __init__(self) -> None:
        self.delivered = 0
        self.failed = 0
        self.error: KafkaError | None = None

    def __call__(self, err: KafkaError | None, _msg: Any) -> None:
        if err is None:
            self.delivered += 1
        else:
            self.failed += 1
            self.error = self.error or err


def _send(producer: Any, topic: str, event: Event, key_fn: KeyFn | None, on_delivery: _Delivery) -> None:
    value = encode_event(event)
    key = key_fn(event) if key_fn is not None else None
    while True:
        try:
            producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
            break
        except BufferError:  # local queue full: let deliveries drain
            producer.poll(0.05)
    producer.poll(0)


def _failure(bootstrap: str, topic: str, delivery: _Delivery, pending: int) -> SourceError:
    reason = delivery.error.str() if delivery.error is not None else f"{pending} not acknowledged in time"
    return SourceError(
        f"could not deliver {delivery.failed + pending} event(s) to topic '{topic}': {reason}",
        location=bootstrap,
    )


def produce(
    bootstrap: str, topic: str, events: Iterable[Event], key_fn: KeyFn | None = None, timeout: float = 30
) -> int:
    """Produce ``events`` to ``topic`` (acks=all, idempotent), wait until all are acknowledged.

    Args:
        bootstrap: ``host:port`` of the broker.
        topic: Target topic.
        events: Values: bytes as they are, dicts as compact JSON.
        key_fn: Optional message key of an event, e.g. :func:`user_key`.
        timeout: Seconds a message may wait for its acknowledgement.

    Returns:
        How many events were produced.

    Raises:
        SourceError: A message could not be delivered (names ``bootstrap``).

    Example:
        >>> rng, now = random.Random(0), datetime.now(UTC)
        >>> produce("127.0.0.1:19092", "clicks", [clickstream_event(rng, now)], user_key)  # doctest: +SKIP
        1

    """
    producer = _producer(bootstrap, timeout)
    delivery = _Delivery()
    count = 0
    for event in events:
        _send(producer, topic, event, key_fn, delivery)
        count += 1
    pending = producer.flush(timeout + 5)
    if pending or delivery.failed:
        raise _failure(bootstrap, topic, delivery, pending)
    return count


class EventGenerator(threading.Thread):
    """A daemon thread producing events (clickstream by default) to ``topic`` at ``rate`` events per second.

    Pacing is a token bucket driven by the monotonic clock (no drift; bursts at most 100 ms worth). The
    thread ends when :meth:`stop` is called or ``max_events`` were sent, after flushing. Clickstream
    events are keyed by ``user_id``.

    Args:
        bootstrap: ``host:port`` of the broker.
        topic: Target topic.
        rate: Events per second.
        max_events: Stop after this many events (None: run until :meth:`stop`).
        seed: Seed of the event randomness (None: random).
        make_event: Draws one event from ``(rng, now)``; default :func:`clickstream_event`.
        key_fn: The message key of an event; default :func:`user_key`.

    Attributes:
        produced: Events acknowledged by the broker so far.
        error: The first delivery error, or the exception that ended the thread, if any.

    Example:
        >>> gen = EventGenerator("127.0.0.1:19092", "clicks", rate=500, max_events=1000)  # doctest: +SKIP
        >>> gen.start(); gen.join()  # doctest: +SKIP
        >>> gen.produced  # doctest: +SKIP
        1000
        >>> customers = customer_records(random.Random(1), datetime.now(UTC), 100)
        >>> def transaction(rng, now):
        ...     return transaction_event(rng, now, customers)
        >>> EventGenerator("127.0.0.1:19092", "transactions", rate=50, make_event=transaction,
        ...                key_fn=customer_key)  # doctest: +SKIP

    """

    def __init__(
        self, bootstrap: str, topic: str, rate: float = 100.0, max_events: int | None = None,
        seed: int | None = None, make_event: EventFn | None = None, key_fn: KeyFn | None = user_key,
    ) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        super().__init__(name=f"event-generator-{topic}", daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.rate = rate
        self.max_events = max_events
        self.error: BaseException | None = None
        self.make_event: EventFn = make_event or clickstream_event
        self.key_fn = key_fn
        self._rng = random.Random(seed)
        self._stopping = threading.Event()
        self._delivery = _Delivery()

    @property
    def produced(self) -> int:
        """Events acknowledged by the broker so far."""
        return self._delivery.delivered

    def stop(self) -> None:
        """Ask the thread to finish (it flushes what it sent, then ends); join it to wait."""
        self._stopping.set()

    def run(self) -> None:
        """Produce until stopped or ``max_events`` are sent (called by :meth:`start`)."""
        try:
            self._run()
        except BaseException as exc:  # kept for the caller, a thread cannot raise to it
            self.error = exc

    def _run(self) -> None:
        producer = _producer(self.bootstrap, timeout=30)
        capacity = max(1.0, self.rate / 10)
        tokens, last, sent = 0.0, time.monotonic(), 0
        while not self._stopping.is_set() and (self.max_events is None or sent < self.max_events):
            now = time.monotonic()
            tokens = min(capacity, tokens + (now - last) * self.rate)
            last = now
            batch = int(tokens) if self.max_events is None else min(int(tokens), self.max_events - sent)
            if batch == 0:
                self._stopping.wait((1 - tokens) / self.rate)
                continue
            stamp = datetime.now(UTC)
            for _ in range(batch):
                _send(producer, self.topic, self.make_event(self._rng, stamp), self.key_fn, self._delivery)
            tokens -= batch
            sent += batch
        pending = producer.flush(35)
        if pending or self._delivery.failed:
            self.error = _failure(self.bootstrap, self.topic, self._delivery, pending)


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

    Example:
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
