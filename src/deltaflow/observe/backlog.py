"""Each flow's backlog as it is now, without a JVM: its checkpoint's committed offsets against its sources.

A batch's own backlog (the event log's ``kafka_offsets_behind``) is what was left when that batch ran; for
a stopped or silent flow that says nothing about the records that arrived since. Here the newest committed
batch's offsets (``offsets/N`` of the checkpoint, where ``commits/N`` exists) are compared with:

* Kafka: each partition's latest offset (the high watermark), from the brokers with ``confluent-kafka``;
  partitions the checkpoint does not know yet count from their earliest offset;
* Delta: the source table's newest version (``deltalake``), found by the table id the offset names.

A source that cannot be asked (broker unreachable, table gone) is left out, so the figure is ``None``
rather than a guess. File sources are not counted.

Examples:
    >>> probe = BacklogProbe(layout, spec.kafka)  # doctest: +SKIP
    >>> probe.measure({"bronze_clicks": ("bronze_clicks", ["DeltaSource[file:/x]"])})  # doctest: +SKIP
    {'bronze_clicks': Backlog(kafka_offsets=1200, delta_versions=None)}

"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deltaflow.spec import KafkaSpec
    from deltaflow.storage import FlowCheckpoint, StorageLayout

#: Kafka client properties confluent-kafka shares with the Java client (the rest are Java-only).
_LIBRDKAFKA_KEYS = re.compile(r"^(security\.protocol|sasl\.(mechanisms?|username|password)|ssl\..+)$")


@dataclass(frozen=True)
class Backlog:
    """Records not yet read by a flow: Kafka offsets and Delta versions (None: no such source, or unknown)."""

    kafka_offsets: int | None = None
    delta_versions: int | None = None


def committed_offsets(layout: StorageLayout, checkpoint: FlowCheckpoint) -> list[Any] | None:
    """The per-source offsets of the newest committed batch of ``checkpoint`` (None: nothing committed).

    ``offsets/N`` holds a version line, the batch's metadata, then one JSON offset per source (``-`` for a
    source without one). A carrier's query reads its sources once per branch (:mod:`deltaflow.sinks.carry`):
    its own branch's are returned.
    """
    from deltaflow.sinks.carry import carried_flows

    batches = [int(n) for n in layout.fs.list(checkpoint.commits) if n.isdigit()]
    if not batches:
        return None
    text = layout.fs.read_text(f"{checkpoint.offsets}/{max(batches)}")
    if not text:
        return None
    offsets = [None if line.strip() == "-" else json.loads(line) for line in text.splitlines()[2:] if line]
    return offsets[:len(offsets) // (1 + len(carried_flows(layout, checkpoint)))]


class BacklogProbe:
    """Measures flows' backlogs now; one per reader (it keeps its Kafka client and table ids).

    Args:
        layout: The pipeline's storage.
        kafka: The spec's ``kafka:`` (brokers and client properties; credentials stay in this process);
            ``None``: Kafka sources are left out (their figure is the one at their last batch).
        timeout: Seconds to wait for a broker before leaving Kafka out.

    """

    def __init__(self, layout: StorageLayout, kafka: KafkaSpec | None, timeout: float = 2.0) -> None:
        self.layout, self.kafka, self.timeout = layout, kafka, timeout
        self._consumer: Any = None
        self._table_ids: dict[str, str] = {}  # reservoir id -> table path

    def measure(self, flows: Mapping[str, tuple[str, Sequence[str]]]) -> dict[str, Backlog]:
        """The backlog of each flow, given its dataset and its sources' descriptions (from the event log).

        The descriptions (``DeltaSource[file:/path]``) say where Delta sources are; Kafka topics are named
        by the offsets themselves.
        """
        found: dict[str, Backlog] = {}
        for flow, (dataset, descriptions) in flows.items():
            offsets = committed_offsets(self.layout, self.layout.position(dataset, flow))
            if offsets is None:
                continue
            kafka = [o for o in offsets if _is_kafka(o)]
            delta = [o for o in offsets if isinstance(o, dict) and "reservoirId" in o]
            found[flow] = Backlog(self.kafka_behind(kafka) if kafka else None,
                                  self._delta_behind(delta, descriptions) if delta else None)
        return found

    def close(self) -> None:
        """Close the Kafka client."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def kafka_behind(self, offsets: list[dict[str, dict[str, int]]]) -> int | None:
        """Records in Kafka after ``offsets`` (``{topic: {partition: offset}}`` each); None: unknown."""
        marks = self.kafka_watermarks(offsets)
        if marks is None:
            return None
        return sum(max(0, high - (low if position is None or position < 0 else position))
                   for position, low, high in marks)

    def kafka_watermarks(self, offsets: list[dict[str, dict[str, int]]],
                         ) -> list[tuple[int | None, int, int]] | None:
        """``(position, low, high)`` of every partition of the offsets' topics (position None: not in them).

        None when the brokers cannot be asked.
        """
        consumer = self._kafka_consumer()
        if consumer is None:
            return None
        from confluent_kafka import TopicPartition

        found = []
        try:
            for offset in offsets:
                for topic, partitions in offset.items():
                    known = consumer.list_topics(topic, timeout=self.timeout).topics[topic].partitions
                    for partition in known:
                        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                                   timeout=self.timeout, cached=False)
                        found.append((partitions.get(str(partition)), low, high))
        except Exception:  # a broker that went away mid-way: unknown, not zero
            self.close()
            return None
        return found

    def _kafka_consumer(self) -> Any:
        if self._consumer is None and self.kafka is not None:
            from confluent_kafka import Consumer

            from deltaflow.sources.kafka import check_reachable

            try:
                check_reachable(self.kafka.bootstrap_servers, timeout=self.timeout)
            except Exception:
                return None
            conf = {"bootstrap.servers": self.kafka.bootstrap_servers, "group.id": "deltaflow-backlog",
                    "enable.auto.commit": False, "log_level": 0,
                    **{k: v for k, v in self.kafka.options.items() if _LIBRDKAFKA_KEYS.match(k)}}
            self._consumer = Consumer(conf)
        return self._consumer

    def _delta_behind(self, offsets: list[dict[str, Any]], descriptions: Sequence[str]) -> int | None:
        from deltalake import DeltaTable

        behind = None
        for offset in offsets:
            path = self._table_path(str(offset["reservoirId"]), descriptions)
            if path is None:
                continue
            try:
                latest = DeltaTable(path, storage_options=self.layout.storage_options or None).version()
            except Exception:  # the table is gone
                continue
            # {reservoirVersion: v, index: -1} means every version before v was read; v itself may be in part
            behind = (behind or 0) + max(0, latest - int(offset["reservoirVersion"]) + 1)
        return behind

    def _table_path(self, reservoir_id: str, descriptions: Sequence[str]) -> str | None:
        if reservoir_id not in self._table_ids:
            from deltalake import DeltaTable

            for description in descriptions:
                match = re.fullmatch(r"DeltaSource\[(?:file:)?(.+)\]", description)
                if match is None:
                    continue
                try:
                    table = DeltaTable(match.group(1), storage_options=self.layout.storage_options or None)
                    self._table_ids[str(table.metadata().id)] = match.group(1)
                except Exception:
                    continue
        return self._table_ids.get(reservoir_id)


def _is_kafka(offset: Any) -> bool:
    """Whether a source offset is Kafka's ``{topic: {partition: offset}}``."""
    return isinstance(offset, dict) and bool(offset) and all(
        isinstance(p, dict) and all(isinstance(v, int) for v in p.values()) for p in offset.values())
