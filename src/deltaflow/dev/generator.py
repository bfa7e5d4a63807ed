"""Realistic clickstream events, and producing events to Kafka (once, or at a steady rate).

Generators of the other examples' data (fraud transactions and customers, order files) are in
:mod:`deltaflow.dev.sample_data`; :class:`EventGenerator` produces any of them.

A clickstream event serialises (compact JSON) to about 250 bytes::

    {"event_id":"67a9c378-7c65-41e5-82e2-e662f728b4fa","user_id":"u012623","product_id":"p00838",
     "event_type":"view","event_timestamp":"2025-05-01T12:00:00.616Z","revenue":0.0,
     "session_id":"3c524465fb2f","page":"/product/p00838","user_agent":"Chrome/126 Windows"}

Examples:
    >>> import random
    >>> from datetime import datetime, timezone
    >>> event = clickstream_event(random.Random(7), datetime(2025, 5, 1, tzinfo=timezone.utc))
    >>> event["event_type"] in EVENT_TYPES
    True

"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from confluent_kafka import KafkaError, Producer

from deltaflow.dev.topics import QUIET
from deltaflow.errors import SourceError

Event = bytes | dict[str, Any] | None  # None: a tombstone (a record with a null value)
KeyFn = Callable[[Event], str | bytes | None]
EventFn = Callable[[random.Random, datetime], Event]

EVENT_TYPES = ("view", "add_to_cart", "purchase")
_WEIGHTS = (0.82, 0.13, 0.05)
_USERS = 20_000
_PRODUCTS = 5_000
_SESSION_SECONDS = 1800
MAX_LAG_MS = 2_000
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

    Examples:
        >>> e = clickstream_event(random.Random(1), datetime(2025, 5, 1, tzinfo=UTC))
        >>> e["revenue"] > 0 if e["event_type"] == "purchase" else e["revenue"] == 0.0
        True

    """
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    user = f"u{rng.randrange(_USERS):06d}"
    rank = min(int((rng.paretovariate(1.0) - 1) * 50), _PRODUCTS - 1)  # Zipf-like popularity
    product = f"p{rank * 7919 % _PRODUCTS:05d}"
    event_type = rng.choices(EVENT_TYPES, _WEIGHTS)[0]
    at = now - timedelta(milliseconds=rng.randrange(MAX_LAG_MS))
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


def encode_event(event: Event) -> bytes | None:
    """The Kafka value of ``event``: bytes as they are, a dict as compact UTF-8 JSON, None as a null value.

    Examples:
        >>> encode_event({"a": 1})
        b'{"a":1}'

    """
    if event is None or isinstance(event, bytes):
        return event
    return json.dumps(event, separators=(",", ":")).encode()


def field_key(field: str) -> KeyFn:
    """A key function keying each event by its ``field`` (so one key's events stay in order on a partition).

    A broken record (bytes that are not a JSON object) gets no key.

    Examples:
        >>> field_key("customer_id")({"customer_id": "c00042"})
        'c00042'

    """

    def key(event: Event) -> str | bytes | None:
        if isinstance(event, bytes):
            try:
                event = json.loads(event)
            except ValueError:  # not JSON, or not UTF-8
                return None
        value = event.get(field) if isinstance(event, dict) else None
        return None if value is None else str(value)

    return key


#: Key clickstream events by ``user_id``: ``user_key({"user_id": "u000042"}) == "u000042"``.
user_key = field_key("user_id")


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
        events: Values: bytes as they are, dicts as compact JSON, None as a null value (a tombstone).
        key_fn: Optional message key of an event, e.g. :func:`user_key`.
        timeout: Seconds a message may wait for its acknowledgement.

    Returns:
        How many events were produced.

    Raises:
        SourceError: A message could not be delivered (names ``bootstrap``).

    Examples:
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

    Examples:
        >>> gen = EventGenerator("127.0.0.1:19092", "clicks", rate=500, max_events=1000)  # doctest: +SKIP
        >>> gen.start(); gen.join()  # doctest: +SKIP
        >>> gen.produced  # doctest: +SKIP
        1000
        >>> from deltaflow.dev.sample_data import customer_key, customer_records, transaction_event
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
