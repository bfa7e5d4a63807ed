"""Kafka as a streaming source, landing raw records with their source position.

Every record keeps ``topic``, ``partition``, ``offset`` and ``timestamp``, its ``key`` and ``value`` as text,
and the time deltaflow ingested it. Bytes are never lost: when a key or value is not valid UTF-8, the text
column holds it with invalid sequences replaced (so every Delta reader can read the table) and
``key_bytes`` / ``value_bytes`` hold the original bytes; for valid UTF-8 those columns are null and the
text is byte-for-byte the payload.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

from deltaflow.define.context import current
from deltaflow.errors import SourceError
from deltaflow.resolve.state import analysing, note_source, warn

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

BRONZE_KAFKA_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value", "key_bytes",
                        "value_bytes", "ingested_at")


def check_reachable(bootstrap: str, timeout: float = 10.0) -> None:
    """Fail fast, in one line, when none of the bootstrap servers accepts a TCP connection.

    Spark's Kafka consumer would otherwise retry for minutes before failing with a long stack trace.

    Raises:
        SourceError: Naming the bootstrap address.

    """
    for server in (s.strip() for s in bootstrap.split(",") if s.strip()):
        host, _, port = server.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]") or "localhost", int(port)), timeout=timeout):
                return
        except (OSError, ValueError):
            continue
    raise SourceError("Kafka broker unreachable", location=bootstrap,
                      hint="is the broker running? 'deltaflow kafka start' runs one locally")


def read_kafka(
    topic: str | list[str],
    *,
    starting_offsets: str = "earliest",
    max_offsets_per_trigger: int | None = None,
    fail_on_data_loss: bool = True,
    bootstrap_servers: str | None = None,
    **options: Any,
) -> DataFrame:
    """Stream records of one or more Kafka topics, raw, with their source position.

    Args:
        topic: A topic name or a list of names.
        starting_offsets: ``"earliest"`` (default), ``"latest"`` or Spark's JSON offsets, used only the
            first time the flow runs; afterwards its checkpoint decides.
        max_offsets_per_trigger: Upper bound of records per micro-batch (rate limit).
        fail_on_data_loss: Stop when offsets the checkpoint expects are gone (retention, topic deleted).
        bootstrap_servers: Overrides ``kafka.bootstrap_servers`` of the spec.
        **options: Further options of Spark's Kafka source (``minPartitions``, ``kafka.*`` client options).

    Returns:
        A streaming DataFrame with the columns ``topic, partition, offset, timestamp, key, value,
        key_bytes, value_bytes, ingested_at``.

    Examples:
        >>> @dp.table  # doctest: +SKIP
        ... def bronze_clicks():
        ...     return dp.read_kafka("clicks", max_offsets_per_trigger=10_000)

    """
    from pyspark.sql import functions as F

    ctx = current()
    bootstrap = bootstrap_servers or ctx.spec.kafka.bootstrap_servers
    try:
        check_reachable(bootstrap, timeout=2.0 if analysing() else 10.0)
    except SourceError as exc:
        if not analysing():  # Spark's Kafka source is analysed without a broker; a run needs one
            raise
        warn(f"{exc.location}: Kafka broker unreachable ('deltaflow run' needs it)")
    reader = (ctx.spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", ",".join(topic) if isinstance(topic, list) else topic)
              .option("startingOffsets", starting_offsets)
              .option("failOnDataLoss", str(fail_on_data_loss).lower()))
    for key, value in ctx.spec.kafka.options.items():
        reader = reader.option(key if key.startswith("kafka.") else f"kafka.{key}", value)
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    for key, value in options.items():
        reader = reader.option(key, str(value))
    raw = reader.load()
    for name in topic if isinstance(topic, list) else [topic]:
        note_source(f"kafka:{name}")

    # try_validate_utf8 is one scan that yields the text, or null when the bytes are not UTF-8: only then
    # are the bytes kept aside and the text repaired.
    def text(column: str) -> Any:
        as_text = F.col(column).cast("string")
        return F.coalesce(F.try_validate_utf8(as_text), F.make_valid_utf8(as_text))

    def bytes_if_invalid(column: str) -> Any:
        return F.when(F.try_validate_utf8(F.col(column).cast("string")).isNull(), F.col(column))

    return raw.select(
        "topic", "partition", "offset", "timestamp",
        text("key").alias("key"), text("value").alias("value"),
        bytes_if_invalid("key").alias("key_bytes"), bytes_if_invalid("value").alias("value_bytes"),
        F.current_timestamp().alias("ingested_at"),
    )
