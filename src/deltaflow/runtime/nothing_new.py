"""Whether a run that stops by itself has anything to do, answered without a JVM.

A scheduled ``deltaflow run --available-now`` that finds nothing new would start Spark (several seconds on
a small machine) only for every flow to find nothing. Before starting it, each flow's newest committed
batch (its checkpoint's ``offsets/N`` with ``commits/N``) is compared with its sources as they are now:

* Kafka: every partition's position exactly at its latest offset, from the brokers (``confluent-kafka``);
* Delta: the table's newest version (``deltalake``), the table known by the id the offset names;
* files: the folder's files against those the file source has logged as read.

Anything that cannot be shown to be quiet starts Spark as before: a flow with no committed batch or a batch
in flight, a source of another kind or that does not answer, a file source on a glob or object storage,
definitions or spec changed since the last run (:func:`~deltaflow.define.loader.definitions_fingerprint`, and
each dataset's own fingerprint, which sees the project's helper modules too), a
refresh or rewind to finish, a flow whose last run failed, table upkeep configured. A wrong "nothing new"
could only delay rows to a later run, since no checkpoint moves; the checks only say it when they know.

The same checks tell how much is new (:func:`new_input`: bytes in new files, new Kafka records). A run known
to read little starts a JVM that compiles for a quick start rather than for a long life
(:data:`~deltaflow.runtime.session.SMALL_RUN_JIT`); one whose input is not known (a first run, an internal
table with versions unread) keeps Java's default.

Examples:
    >>> reason_to_start(spec, layout, graph, flows, fingerprint)  # doctest: +SKIP
    "flow 'bronze_orders': 1 new file(s) in /data/landing/orders"
    >>> new_input(spec, layout, graph, flows, fingerprint).small  # doctest: +SKIP
    True

"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from deltaflow.observe.backlog import BacklogProbe, committed_offsets
from deltaflow.observe.graph_record import read_graph_record
from deltaflow.runtime.checkpoints import unfinished_batch
from deltaflow.runtime.definition_changes import DefinitionChanges

if TYPE_CHECKING:
    from deltaflow.define.graph import Flow, PipelineGraph
    from deltaflow.runtime.outcomes import FlowOutcome
    from deltaflow.spec import Spec
    from deltaflow.storage import FlowCheckpoint, StorageLayout

_SOURCE = re.compile(r"^(DeltaSource|FileStreamSource)\[(.+)\]$")
#: A Kafka source on a fixed list of topics; a pattern may match topics its offsets do not name yet.
_KAFKA = re.compile(r"^KafkaV2\[Subscribe\[(.+)\]\]$")
#: Delta's source offset index for "every file of this version read" (``DeltaSourceOffset.END_INDEX``).
_END_INDEX = 2**63 - 1


#: The most a run may have to read and still count as small (see ``SMALL_RUN_JIT`` for the measurements).
SMALL_RUN_BYTES = 128 * 2**20
SMALL_RUN_RECORDS = 200_000


@dataclass(frozen=True)
class NewInput:
    """What a run that stops by itself has to read, as far as it can be told without a JVM.

    Attributes:
        reason: Why the run must start Spark (None: nothing new anywhere, no need to).
        file_bytes: Bytes in new files of its file sources (None: unknown).
        kafka_records: New records of its Kafka sources (None: unknown).

    Examples:
        >>> NewInput("flow 'bronze': 2 new file(s) in /landing", 3_000_000, 0).small
        True

    """

    reason: str | None
    file_bytes: int | None = None
    kafka_records: int | None = None

    @property
    def small(self) -> bool:
        """Known, and little enough that the run's JVM is better off compiling less (see ``session``)."""
        return (self.file_bytes is not None and self.kafka_records is not None
                and self.file_bytes <= SMALL_RUN_BYTES and self.kafka_records <= SMALL_RUN_RECORDS)

    @property
    def decided(self) -> bool:
        """Spark starts, and not for a small run, whatever more is found: no need to look further."""
        return self.reason is not None and not self.small

    def plus(self, other: NewInput, where: str = "") -> NewInput:
        """Both: the first reason (``other``'s after ``where``); a size unknown if unknown in either."""
        def add(a: int | None, b: int | None) -> int | None:
            return None if a is None or b is None else a + b

        reason = self.reason or (None if other.reason is None else where + other.reason)
        return NewInput(reason, add(self.file_bytes, other.file_bytes),
                        add(self.kafka_records, other.kafka_records))

    def describe(self) -> str:
        """The sizes for a message (``3.1 MB in new files, 0 new Kafka records``)."""
        megabytes = (self.file_bytes or 0) / 1e6
        return f"{megabytes:.1f} MB in new files, {self.kafka_records or 0:,} new Kafka records"


def reason_to_start(spec: Spec, layout: StorageLayout, graph: PipelineGraph, flows: Sequence[Flow],
                    fingerprint: str) -> str | None:
    """Why the run of ``flows`` must start Spark, or None when none of them has anything new to read.

    Args:
        spec: The pipeline's spec.
        layout: Its storage.
        graph: Its loaded definitions.
        flows: The flows the run would start (each stops by itself).
        fingerprint: The definitions' and spec's fingerprint now.

    """
    return new_input(spec, layout, graph, flows, fingerprint).reason


def new_input(spec: Spec, layout: StorageLayout, graph: PipelineGraph, flows: Sequence[Flow],
              fingerprint: str) -> NewInput:
    """What the run of ``flows`` has to read: why it must start Spark, and how much is new if that is known.

    Takes :func:`reason_to_start`'s arguments. The sizes are known only when every flow's sources can be
    checked (as for "nothing new"); an internal table with versions not read yet counts as unknown.
    """
    if spec.maintenance.optimize_every or spec.maintenance.optimize_interval or spec.maintenance.vacuum_every:
        return NewInput("table upkeep is configured")
    record = read_graph_record(layout)
    if record is None or record.get("fingerprint") != fingerprint:
        return NewInput("the definitions or the spec changed since the last run")
    changed = DefinitionChanges.since_last_run(layout, graph, spec).changed  # a helper module, say
    if changed:
        return NewInput(f"the definition of '{changed[0]}' changed since the last run")
    if layout.rewound_tables():
        return NewInput("a rewind to finish")
    for dataset in graph.datasets:
        if layout.fs.exists(layout.refresh_record(dataset)):
            return NewInput(f"a full refresh of '{dataset}' to finish")
    try:
        events = _last_events(layout, spec.name)
    except Exception as exc:  # no event log, or one deltalake cannot read
        return NewInput(f"the event log cannot be read ({type(exc).__name__})")
    probe = BacklogProbe(layout, spec.kafka)
    total = NewInput(None, 0, 0)
    try:
        for flow in flows:
            if layout.carrier(layout.checkpoint(flow.target, flow.name)) is not None:
                continue  # carried by another flow's query: it reads what its carrier reads
            try:
                found = _flow_input(layout, probe, flow, events.get(flow.name, {}))
            except Exception as exc:  # a damaged checkpoint: the run's own repairs are for that
                found = NewInput(f"its checkpoint cannot be read ({type(exc).__name__})")
            total = total.plus(found, f"flow '{flow.name}': ")
            if total.decided:
                break
    finally:
        probe.close()
    return total


def flows_input(spec: Spec, layout: StorageLayout, flows: Sequence[Flow]) -> dict[str, NewInput]:
    """Each flow's own new input, every flow looked at (``deltaflow plan``); a carried flow: its carrier's.

    Only the per-flow checks of :func:`new_input`: what the whole run has to do (a refresh to finish,
    changed definitions) is the caller's to add.
    """
    try:
        events = _last_events(layout, spec.name)
    except Exception as exc:
        return {f.name: NewInput(f"the event log cannot be read ({type(exc).__name__})") for f in flows}
    probe = BacklogProbe(layout, spec.kafka)
    found: dict[str, NewInput] = {}
    try:
        for flow in flows:
            carrier = layout.carrier(layout.checkpoint(flow.target, flow.name))
            try:
                found[flow.name] = (NewInput("carried by another flow's query") if carrier is not None
                                    else _flow_input(layout, probe, flow, events.get(flow.name, {})))
            except Exception as exc:
                found[flow.name] = NewInput(f"its checkpoint cannot be read ({type(exc).__name__})")
    finally:
        probe.close()
    return found


def end_quietly(spec: Spec, layout: StorageLayout, flows: Sequence[Flow], trigger: str) -> list[FlowOutcome]:
    """End a run that has nothing to do without Spark: each flow logged as completed, under the leases.

    It takes and gives back the tables' leases as a run does (another run writing them: refused).
    """
    from deltaflow.runtime.event_log import EventLog, end_event
    from deltaflow.runtime.outcomes import FlowOutcome
    from deltaflow.storage.lease import TableLeases, lease_ttl

    log = EventLog(layout.event_log, spec.name, trigger=trigger, storage_options=layout.storage_options)
    leases = TableLeases(layout, spec.name, log.run_id, lease_ttl(spec.lease.ttl))
    try:
        leases.acquire({f.target for f in flows})
        for flow in flows:
            log.add(end_event(spec.name, log.run_id, flow.name, "completed", None))
    finally:
        log.close()
        leases.release()
    return [FlowOutcome(f.name, str(f.location), "completed") for f in flows]


def _last_events(layout: StorageLayout, pipeline: str) -> dict[str, dict[str, dict[str, Any]]]:
    """Each flow's newest batch event and newest end event (``{"batch": row, "end": row}``)."""
    from deltaflow.commands.status import read_events

    found: dict[str, dict[str, dict[str, Any]]] = {}
    for row in read_events(layout, pipeline, ["flow", "kind", "sources", "end_time"]):
        found.setdefault(row["flow"], {})["batch" if row["kind"] == "batch" else "end"] = row
    return found


def _flow_input(layout: StorageLayout, probe: BacklogProbe, flow: Flow,
                events: dict[str, dict[str, Any]]) -> NewInput:
    checkpoint = layout.checkpoint(flow.target, flow.name)
    if not any(n.isdigit() for n in layout.fs.list(checkpoint.commits)):
        start = layout.start_of(checkpoint)  # a flow that went on alone: it starts at a version of its input
        if start is not None and start[1] > layout.open_table(layout.table(start[0])).version():
            return NewInput(None, 0, 0)
        return NewInput(f"{start[0]} has new versions" if start else "no batch committed yet")
    if unfinished_batch(layout.fs, checkpoint) is not None:
        return NewInput("a batch in flight")
    if (end := events.get("end", {}).get("kind")) in ("failed", "skipped"):
        return NewInput(f"it {'failed' if end == 'failed' else 'was skipped'} in its last run")
    offsets = committed_offsets(layout, checkpoint)
    batch = events.get("batch")
    if offsets is None or batch is None or not batch.get("sources"):
        return NewInput("its sources are not in the event log")
    descriptions = [str(s.get("description")) for s in json.loads(batch["sources"])]
    if len(descriptions) != len(offsets):
        return NewInput("its sources changed")
    total = NewInput(None, 0, 0)
    for index, (description, offset) in enumerate(zip(descriptions, offsets, strict=True)):
        found = _source_input(layout, probe, checkpoint, index, description, offset)
        total = total.plus(found)
        if total.decided:
            break
    return total


def _source_input(layout: StorageLayout, probe: BacklogProbe, checkpoint: FlowCheckpoint, index: int,
                  description: str, offset: Any) -> NewInput:
    kafka = _KAFKA.match(description)
    if kafka is not None and isinstance(offset, dict):
        if not set(kafka.group(1).split(",")) <= set(offset):
            return NewInput("a Kafka topic its offsets do not name")
        marks = probe.kafka_watermarks([offset])
        if marks is None:
            return NewInput("the Kafka brokers do not answer")
        # exactly at each partition's end: a topic recreated or cut by retention under it is Spark's to judge
        if any(position is None or not low <= position <= high for position, low, high in marks):
            return NewInput("a Kafka partition moved under its offsets")
        behind = sum(high - position for position, _, high in marks if position is not None)
        return NewInput(f"{behind} new Kafka record(s)" if behind else None, 0, behind)
    match = _SOURCE.match(description)
    if match is None or not isinstance(offset, dict):
        return NewInput(f"a source deltaflow cannot check ({description[:80]})")
    kind, location = match.groups()
    if kind == "DeltaSource":  # nothing unread: 0 bytes; versions unread are not measured (unknown)
        reason = _delta_reason(layout, location, offset)
        return NewInput(None, 0, 0) if reason is None else NewInput(reason)
    return _files_input(layout, checkpoint, index, location, offset)


def _delta_reason(layout: StorageLayout, location: str, offset: dict[str, Any]) -> str | None:
    from deltalake import DeltaTable

    path = location.removeprefix("file:")
    try:
        table = DeltaTable(path, storage_options=layout.storage_options or None)
        same = str(table.metadata().id) == str(offset.get("reservoirId"))
        latest = table.version()
    except Exception:
        return f"table {path} cannot be read"
    version, position = int(offset.get("reservoirVersion", -1)), int(offset.get("index", 0))
    if not same:
        return f"table {path} is not the one its offsets name (recreated?)"
    if offset.get("isStartingVersion") or offset.get("isInitialSnapshot"):
        return f"table {path} is not past its first snapshot"
    # index -1: every version before `version` read; END_INDEX: `version` itself read too
    read_up_to = version - 1 if position == -1 else version if position == _END_INDEX else None
    if read_up_to is None or latest > read_up_to:
        return f"table {path} has new versions"
    return None


def _files_input(layout: StorageLayout, checkpoint: FlowCheckpoint, index: int, location: str,
                 offset: dict[str, Any]) -> NewInput:
    folder = urlparse(location)
    if folder.scheme not in ("", "file") or any(c in location for c in "*?[{"):
        return NewInput(f"a file source deltaflow cannot list ({location})")
    if "logOffset" not in offset:
        return NewInput("a file source without a log offset")
    path = unquote(folder.path)
    if not os.path.isdir(path):
        return NewInput(f"no folder {path}")
    seen = _logged_files(layout, f"{checkpoint.path}/sources/{index}", int(offset["logOffset"]))
    new = [p for p in _data_files(path) if p not in seen]
    return NewInput(f"{len(new)} new file(s) in {path}" if new else None,
                    sum(os.path.getsize(p) for p in new), 0)


def _logged_files(layout: StorageLayout, log: str, last_batch: int) -> set[str]:
    """The files a file source's log says its batches up to ``last_batch`` read (absolute paths)."""
    seen: set[str] = set()
    for name in layout.fs.list(log):
        number = name.removesuffix(".compact")
        if not number.isdigit() or int(number) > last_batch:
            continue
        for line in (layout.fs.read_text(f"{log}/{name}") or "").splitlines()[1:]:
            entry = json.loads(line)
            if isinstance(entry, dict) and "path" in entry:
                seen.add(os.path.abspath(unquote(urlparse(str(entry["path"])).path)))
    return seen


def _data_files(folder: str) -> Iterable[str]:
    """Every file under ``folder`` Spark could read: none whose name or folder starts with ``.`` or ``_``."""
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for name in files:
            if not name.startswith((".", "_")):
                yield os.path.abspath(os.path.join(root, name))
