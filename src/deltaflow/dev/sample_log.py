"""A made-up event log of many batches, written through the event log's own writer (for scale tests).

Three flows (``bronze`` from Kafka, ``silver`` with expectations, ``gold``) take turns, a batch a second,
and the events go in ``appends`` appends, as a long run's writer thread would (compacting every
:data:`~deltaflow.runtime.event_log.COMPACT_EVERY` appends). The graph record is written too.

Examples:
    >>> write_batches(StorageLayout("/tmp/big"), batches=10_000, appends=3_334)  # doctest: +SKIP

"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from deltaflow.runtime.event_log import EventLog, batch_event

if TYPE_CHECKING:
    from deltaflow.storage import StorageLayout

FLOWS = ("bronze", "silver", "gold")


def _graph(pipeline: str) -> dict[str, Any]:
    def dataset(name: str, inputs: dict[str, str], sources: list[str]) -> dict[str, Any]:
        return {"dataset": name, "kind": "table", "stored": True, "location": f"defs.py:{len(name)}",
                "flows": [{"flow": name, "location": f"defs.py:{len(name)}", "inputs": inputs,
                           "sources": sources}]}

    return {"pipeline": pipeline, "trigger": "continuous", "datasets": [
        dataset("bronze", {}, ["kafka:events"]), dataset("silver", {"bronze": "stream"}, []),
        dataset("gold", {"silver": "stream"}, [])]}


def write_batches(layout: StorageLayout, batches: int, appends: int, pipeline: str = "bench",
                  start: datetime | None = None) -> None:
    """Log ``batches`` batches of ``pipeline`` in ``appends`` appends, ending about now."""
    first = start or datetime.now(UTC) - timedelta(seconds=batches)
    log = EventLog(layout.event_log, pipeline, run_id="sample", trigger="continuous",
                   storage_options=layout.storage_options)
    log.close()  # its writer thread is not needed: appends go through its _append below
    events = []
    for i in range(batches):
        flow = FLOWS[i % len(FLOWS)]
        checks: dict[str, int] | None = None
        if flow == "silver":
            checks = {"_rows": 1_000, "_dropped": 1, "_quarantined": 2, "positive": 3}
        events.append(batch_event(pipeline, log.run_id, {
            "name": flow, "id": f"q-{flow}", "batchId": i // len(FLOWS), "numInputRows": 1_000,
            "timestamp": (first + timedelta(seconds=i)).isoformat().replace("+00:00", "Z"),
            "durationMs": {"triggerExecution": 600, "addBatch": 500},
            "sources": [{"description": "KafkaV2[Subscribe[events]]", "startOffset": {"events": {"0": i}},
                         "endOffset": {"events": {"0": i + 1}}, "metrics": {"maxOffsetsBehindLatest": "0"}}],
            "observedMetrics": {"deltaflow_expectations": checks} if checks else {}}))
    size = -(-len(events) // appends)
    for at in range(0, len(events), size):
        log._append(events[at:at + size])
        if log.error is not None:
            raise log.error
    layout.fs.write_text(layout.graph_record, json.dumps(_graph(pipeline)))
