"""``deltaflow demo``: a shipped example pipeline, live, on embedded defaults.

Each example gets a feeder of realistic generated data, then runs continuously with one live status line
and the dashboard (``deltaflow ui``) beside it, until ``--seconds`` pass or Ctrl-C; at the end the demo
prints every table's row count and the top rows of the example's gold table (read with ``deltalake``, no
JVM), and the commands that look at what ran. Spark's own output goes to ``<storage>/_logs/spark.log``.

- ``clickstream`` (default): the embedded Kafka broker, clickstream events into topic ``clicks``.
- ``orders``: a JSON file of orders (a few percent invalid on purpose) dropped every second into
  ``<storage>/landing/orders``; no Kafka.
- ``fraud``: the embedded Kafka broker, card transactions into topic ``transactions``, and customer
  dimension files in ``<storage>/landing/customers`` (all customers first, then updates every few seconds).
- ``customers_cdc``: the embedded Kafka broker, customer change events (inserts, updates, deletes; out of
  order, some twice) into topic ``customer_changes``.

Landing folders always live under the demo's storage folder, never in the examples folder.

Examples:
    >>> run_demo(example="orders", seconds=30, rate=500, storage=Path("deltaflow_demo"), port=19092,
    ...          stop=threading.Event(), console=Console())  # doctest: +SKIP

"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rich.console import Console
from rich.live import Live

from deltaflow.cli.progress import ProgressPrinter
from deltaflow.dev.broker import EmbeddedKafka
from deltaflow.dev.demo_summary import summary
from deltaflow.dev.generator import EventGenerator, field_key
from deltaflow.dev.sample_data import (
    CustomerChangeFeed,
    FileFeeder,
    customer_id,
    customer_key,
    customer_records,
    customer_update,
    order_events,
    transaction_event,
    write_json_lines,
)
from deltaflow.dev.sensors import SENSORS, sensor_reading
from deltaflow.dev.topics import create_topic
from deltaflow.errors import ArgumentError, ConfigError
from deltaflow.examples import example_path
from deltaflow.pipeline import Pipeline
from deltaflow.runtime.metastore import database_of
from deltaflow.runtime.run_log import LOG_VARIABLE, new_log
from deltaflow.spec import MetastoreSpec, Spec

if TYPE_CHECKING:
    from deltaflow.ui.app import UiServer

TOPIC = "clicks"
TRANSACTIONS_TOPIC = "transactions"
FRAUD_CUSTOMERS = 2_000
CUSTOMER_UPDATES_EVERY = 5.0  # seconds
CUSTOMER_UPDATES_PER_FILE = 20


class Feeder(Protocol):
    """A thread generating data for a demo (:class:`EventGenerator`, :class:`FileFeeder`)."""

    @property
    def produced(self) -> int:
        """Records delivered so far."""

    error: BaseException | None

    def start(self) -> None:
        """Start the thread."""

    def stop(self) -> None:
        """Ask the thread to finish."""

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to end."""


@dataclass(frozen=True)
class Feed:
    """A running feeder and what it produces (``"clicks"``, ``"orders"``...)."""

    feeder: Feeder
    label: str


@dataclass(frozen=True)
class Showcase:
    """The table whose top rows end the demo, sorted descending by ``order_by``."""

    table: str
    order_by: str
    columns: tuple[str, ...]
    title: str


FeedsFn = Callable[[Spec, str, int, Console], list[Feed]]


@dataclass(frozen=True)
class DemoExample:
    """A shipped example the demo can run: whether it needs Kafka, how to feed it, what to show."""

    name: str
    kafka: bool
    feeds: FeedsFn
    showcase: Showcase


def _landing(spec: Spec, parameter: str) -> Path:
    """The landing folder the spec's ``parameter`` names, created if missing."""
    folder = (spec.root / spec.parameters[parameter]).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _clickstream_feeds(spec: Spec, bootstrap: str, rate: int, console: Console) -> list[Feed]:
    create_topic(bootstrap, TOPIC, partitions=3)
    generator = EventGenerator(bootstrap, TOPIC, rate=rate)
    console.print(f"generator: {rate:,} clickstream events/s into topic '{TOPIC}'", markup=False)
    return [Feed(generator, "clicks")]


def _orders_feeds(spec: Spec, bootstrap: str, rate: int, console: Console) -> list[Feed]:
    landing = _landing(spec, "orders_landing")

    def orders(rng: random.Random, now: datetime) -> list[dict[str, Any]]:
        return order_events(rng, now, rate)

    feeder = FileFeeder(landing, orders, interval=1.0, prefix="orders")
    console.print(f"generator: a file of {rate:,} orders (about 5 % invalid) every second into {landing}",
                  markup=False, soft_wrap=True)
    return [Feed(feeder, "orders")]


def _fraud_feeds(spec: Spec, bootstrap: str, rate: int, console: Console) -> list[Feed]:
    landing = _landing(spec, "customers_landing")
    now = datetime.now(UTC)
    customers = customer_records(random.Random(), now, FRAUD_CUSTOMERS)
    write_json_lines(landing, f"customers-{now:%Y%m%dT%H%M%S%f}-all.json", customers)

    def updates(rng: random.Random, at: datetime) -> list[dict[str, Any]]:
        return [customer_update(rng, customer_id(rng.randrange(FRAUD_CUSTOMERS)), at)
                for _ in range(CUSTOMER_UPDATES_PER_FILE)]

    def transaction(rng: random.Random, at: datetime) -> dict[str, Any]:
        return transaction_event(rng, at, customers)

    create_topic(bootstrap, TRANSACTIONS_TOPIC, partitions=3)
    generator = EventGenerator(bootstrap, TRANSACTIONS_TOPIC, rate=rate, make_event=transaction,
                               key_fn=customer_key)
    feeder = FileFeeder(landing, updates, interval=CUSTOMER_UPDATES_EVERY, prefix="customers")
    console.print(f"generator: {rate:,} transactions/s into topic '{TRANSACTIONS_TOPIC}'; "
                  f"{FRAUD_CUSTOMERS:,} customers, then {CUSTOMER_UPDATES_PER_FILE} customer updates every "
                  f"{CUSTOMER_UPDATES_EVERY:g} s, into {landing}", markup=False, soft_wrap=True)
    return [Feed(generator, "transactions"), Feed(feeder, "customer updates")]


def _customers_cdc_feeds(spec: Spec, bootstrap: str, rate: int, console: Console) -> list[Feed]:
    topic = spec.parameters["source_topic"]
    create_topic(bootstrap, topic, partitions=3)
    generator = EventGenerator(bootstrap, topic, rate=rate, make_event=CustomerChangeFeed(),
                               key_fn=field_key("customer_id"))
    console.print(f"generator: {rate:,} customer change events/s (inserts, updates, deletes; out of order, "
                  f"some twice) into topic '{topic}'", markup=False, soft_wrap=True)
    return [Feed(generator, "customer changes")]


def _sensors_feeds(spec: Spec, bootstrap: str, rate: int, console: Console) -> list[Feed]:
    topic = spec.parameters["topic"]
    create_topic(bootstrap, topic, partitions=3)
    generator = EventGenerator(bootstrap, topic, rate=rate, make_event=sensor_reading,
                               key_fn=field_key("sensor_id"))
    console.print(f"generator: {rate:,} readings/s of {SENSORS} sensors (about 3 % faulty) into topic "
                  f"'{topic}'", markup=False, soft_wrap=True)
    return [Feed(generator, "sensor readings")]


DEMOS: dict[str, DemoExample] = {
    "clickstream": DemoExample("clickstream", True, _clickstream_feeds, Showcase(
        "gold_hourly_product_metrics", "view_count",
        ("window", "product_id", "view_count", "unique_users", "total_revenue"),
        "Top products by views (gold_hourly_product_metrics)")),
    "orders": DemoExample("orders", False, _orders_feeds, Showcase(
        "gold_daily_sales", "total_revenue",
        ("window", "product_category", "order_count", "total_revenue", "avg_order_value"),
        "Top categories by revenue (gold_daily_sales)")),
    "fraud": DemoExample("fraud", True, _fraud_feeds, Showcase(
        "fraud_alerts", "tx_timestamp",
        ("tx_timestamp", "customer_id", "amount", "merchant", "risk_score", "suspicion_reasons"),
        "Latest fraud alerts (fraud_alerts)")),
    "customers_cdc": DemoExample("customers_cdc", True, _customers_cdc_feeds, Showcase(
        "customers_audit", "_commit_version",
        ("_commit_version", "_change_type", "customer_id", "name", "tier", "city", "seq"),
        "Latest changes to customers (customers_audit, from its change feed)")),
    "sensors": DemoExample("sensors", True, _sensors_feeds, Showcase(
        "sensor_stats_10min", "window",
        ("window", "sensor_id", "readings", "min_temperature_c", "max_temperature_c", "avg_temperature_c"),
        "Latest 10-minute windows per sensor (sensor_stats_10min)")),
}


def demo_example(name: str) -> DemoExample:
    """The demo of example ``name``.

    Raises:
        ArgumentError: No such example; lists the available ones.

    Examples:
        >>> demo_example("orders").showcase.table
        'gold_daily_sales'

    """
    if name not in DEMOS:
        raise ArgumentError(f"unknown example '{name}'", location="--example",
                            hint=f"available: {', '.join(sorted(DEMOS))}")
    return DEMOS[name]


def run_demo(*, seconds: int, rate: int, storage: Path, port: int, stop: threading.Event,
             console: Console, example: str = "clickstream", ui: bool = True) -> None:
    """Run the demo of ``example``; see the module docstring.

    Spark's own output goes to the storage's ``_logs/spark.log`` (unless ``deltaflow -v``); with ``ui``,
    the dashboard is served beside the run (port 8787, else any free one).

    Raises:
        ArgumentError: ``example`` is unknown (before anything starts).

    """
    demo = demo_example(example)
    storage = storage.resolve()
    broker = EmbeddedKafka(port=port) if demo.kafka else None
    started_broker = False
    bootstrap = ""
    if broker is not None:
        running = broker.status()
        started_broker = not running.running
        # One embedded broker per state folder: a running one is reused, whatever port it listens on.
        console.print(f"kafka: starting the embedded broker on 127.0.0.1:{port}..." if started_broker
                      else f"kafka: reusing the embedded broker at {running.bootstrap}", markup=False)
        bootstrap = broker.start()
    feeds: list[Feed] = []
    try:
        env = {"DELTAFLOW_STORAGE": str(storage), "DELTAFLOW_LANDING": str(storage / "landing")}
        if bootstrap:
            env["DELTAFLOW_KAFKA"] = bootstrap
        loaded = Pipeline.load(example_path(example), env=env).spec
        # its tables by name too, in an embedded metastore under the demo's storage (nothing to start)
        pipeline = Pipeline(loaded.model_copy(update={"metastore": loaded.metastore or MetastoreSpec()}))
        spec = pipeline.spec
        feeds = demo.feeds(spec, bootstrap, rate, console)
        for feed in feeds:
            feed.feeder.start()
        if "DELTAFLOW_LOG_LEVEL" not in os.environ:
            os.environ.setdefault(LOG_VARIABLE, str(new_log(pipeline.layout, pipeline.name)))
        server = _serve_ui(pipeline, console) if ui else None
        console.print("spark: starting (a few seconds)...", markup=False)
        printer = ProgressPrinter(console=console, live=True)
        run = pipeline.start("continuous", on_batch=printer,
                             on_message=lambda message: console.print(message, markup=False))
        timer = threading.Timer(seconds, stop.set)
        timer.daemon = True
        timer.start()
        with Live(printer.status_line(), console=console, refresh_per_second=4, transient=False) as live:
            def status() -> str:
                produced = ", ".join(f"{f.feeder.produced:,} {f.label}" for f in feeds)
                return printer.status_line(f" | produced {produced}" if produced else "")

            def refresh() -> None:
                while not stop.wait(0.25):
                    live.update(status())

            painter = threading.Thread(target=refresh, daemon=True)
            painter.start()
            outcomes = run.wait(stop)
            painter.join()
            live.update(status())  # the batches committed while stopping
        timer.cancel()
        for outcome in outcomes:
            if outcome.state in ("failed", "skipped"):
                console.print(f"{outcome.flow} {outcome.state}: {outcome.error}", markup=False)
        for feed in feeds:
            if feed.feeder.error is not None:
                console.print(f"generator of {feed.label} failed: {feed.feeder.error}", markup=False)
        if server is not None:
            server.stop()
        stored = [name for name, dataset in pipeline.graph.datasets.items() if dataset.stored]
        summary(pipeline.layout, stored, demo.showcase, console, example_path(example),
                stops_broker=broker is not None and started_broker, database=database_of(spec))
    finally:
        for feed in feeds:
            feed.feeder.stop()
        for feed in feeds:
            feed.feeder.join(timeout=10)
        if broker is not None and started_broker:
            broker.stop()


def _serve_ui(pipeline: Pipeline, console: Console) -> UiServer:
    """The dashboard beside the demo: on its usual port, or any free one when that is taken."""
    from deltaflow.cli.shared import start_ui

    try:
        return start_ui(pipeline, console=console)
    except ConfigError:
        return start_ui(pipeline, port=0, console=console)
