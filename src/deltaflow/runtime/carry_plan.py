"""Which flows a run carries inside their upstream flow's query (see :mod:`deltaflow.sinks.carry`).

Carrying is how flows are executed, never what they write: every verb treats a carried table as any other.
A run decides once, before it starts a flow:

* a carrier's checkpoint keeps carrying the flows it records while each still qualifies, with the same
  trigger, and both it and they are part of the run (``--refresh`` names them both, or neither);
* otherwise the carrier *leaves*: each flow it carried gets a checkpoint generation of its own that starts
  reading the carrier's table at the version after the carrier's last batch that wrote the flow's table
  (:func:`position_after_carry`; a carried flow keeps no state, so that is all of its position), and the
  carrier a new generation holding its own sources' offsets alone
  (:func:`~deltaflow.runtime.checkpoints.copy_own_sources`). Nothing is rebuilt, nothing lost or twice;
* a flow that qualifies, whose carrier's checkpoint and its own have no committed batch yet, becomes
  carried (both records are written before the carrier's query starts); one that ran alone joins its
  carrier again once it has read every version of the carrier's table (:func:`join`).

``DELTAFLOW_CARRY=0`` runs every flow in a query of its own (a carrier recorded before leaves, as above).

Examples:
    >>> plan = plan_carries(resolver, layout, selected, set(), run.trigger_of)  # doctest: +SKIP
    >>> plan.carriers  # doctest: +SKIP
    {'bronze_clicks': ['silver_clicks']}

"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deltaflow.runtime.checkpoint_repair import written_batch
from deltaflow.runtime.checkpoints import copy_own_sources
from deltaflow.sinks.carry import carried_flows, carrier_of, carry_record, record_carry

if TYPE_CHECKING:
    from deltaflow.define.graph import PipelineGraph
    from deltaflow.resolve.resolved import ResolvedGraph
    from deltaflow.runtime.triggers import Trigger
    from deltaflow.storage import FlowCheckpoint, StorageLayout


@dataclass
class CarryPlan:
    """Carriers and what they carry in this run.

    Attributes:
        carriers: Carrier flow -> the flows its query writes besides its own.

    """

    carriers: dict[str, list[str]] = field(default_factory=dict)

    @property
    def carried(self) -> dict[str, str]:
        """Carried flow -> its carrier."""
        return {d: u for u, ds in self.carriers.items() for d in ds}


def recorded_carriers(layout: StorageLayout, graph: PipelineGraph, selected: Collection[str],
                      ) -> dict[str, list[str]]:
    """Carrier -> the flows it carried, for the selected flows whose current checkpoint is a carrier's."""
    found = {}
    for flow in graph.flows.values():
        if flow.target in selected and graph.datasets[flow.target].runs:
            carried = carried_flows(layout, layout.checkpoint(flow.target, flow.name))
            if carried:
                found[flow.name] = [d for d in carried if d in graph.flows]
    return found


def leaving(resolver: ResolvedGraph, layout: StorageLayout, recorded: dict[str, list[str]],
            trigger_of: Callable[[str], Trigger], selected: Collection[str]) -> list[str]:
    """The recorded carriers that cannot go on carrying all their flows in this run.

    A carrier goes on only while every flow it carried still qualifies, has the same trigger, is still
    carried by its current checkpoint, and is selected exactly when the carrier is.
    """
    graph = resolver.graph
    found = []
    for carrier, flows in recorded.items():
        position = layout.checkpoint(graph.flows[carrier].target, carrier)
        runs = graph.flows[carrier].target in selected
        stays = [d for d in flows
                 if carrier_of(resolver, d)[0] == carrier and trigger_of(d) == trigger_of(carrier)
                 and (graph.flows[d].target in selected) == runs and carrying()
                 and (c := layout.carrier(layout.checkpoint(graph.flows[d].target, d))) is not None
                 and c.path == position.path]
        if stays != carried_flows(layout, position):
            found.append(carrier)
    return found


def carrying() -> bool:
    """Whether runs may carry flows (``DELTAFLOW_CARRY=0``: every flow in a query of its own)."""
    return os.environ.get("DELTAFLOW_CARRY", "1") != "0"


def position_after_carry(layout: StorageLayout, carried: FlowCheckpoint, carrier: FlowCheckpoint,
                         batch: int | None = None) -> int | None:
    """The version of the carrier's table a carried flow reads alone from, after carrier batch ``batch``.

    ``batch`` None: the newest batch that wrote the carried flow's table (a carrier writes its own table
    first, then the carried ones, each stamped with its flow's app id and the batch id). The answer is the
    version after the carrier's commit of that batch, or of the newest batch before it that wrote (a
    batch that read nothing writes nothing); the first version the carrier wrote when none of its batches
    up to ``batch`` wrote the flow's table; for a flow that ran alone before it joined, the version it had
    read up to then (``joined_at``). None: the carrier never wrote, so the flow reads the table from its
    start.

    Raises:
        ConfigError: The carrier's table's log no longer holds the commits to tell (log retention).

    """
    from deltaflow.errors import ConfigError

    query_id = layout.query_id(carrier)
    if batch is None:
        batch = written_batch(layout, layout.table(carried.dataset), [carried.app_id(query_id)])
    last = -1 if batch is None else batch
    app_id, table = carrier.app_id(query_id), layout.table(carrier.dataset)
    joined = carry_record(layout, carrier).get("joined_at", {}).get(carried.flow)  # it ran alone before
    first_write = None
    for version in range(layout.open_table(table).version(), -1 if joined is None else int(joined) - 1, -1):
        text = layout.fs.read_text(layout.commit_file_at(table, version))
        if text is None:
            raise ConfigError(f"flow '{carried.flow}': the log of '{carrier.dataset}' no longer holds the "
                              f"commit of its carrier's batch {last}, so where it stands cannot be told",
                              hint=f"rebuild it: deltaflow run --full-refresh {carried.dataset}")
        stamps = [action["txn"] for action in map(json.loads, text.splitlines())
                  if "txn" in action and action["txn"].get("appId") == app_id]
        if stamps and int(stamps[0]["version"]) <= last:
            return version + 1
        if stamps:
            first_write = version
    return int(joined) if joined is not None else first_write


def leave(layout: StorageLayout, graph: PipelineGraph, carrier: str) -> FlowCheckpoint:
    """End a carry: each carried flow positioned to go on alone, then the carrier moved (see the module).

    A flow still carried by this checkpoint gets a new generation holding only where it starts
    (``starts_at``, one file). The carrier's move is recorded in its new generation first, so that a run
    interrupted while copying copies again (:func:`finish_leaving`). Running it again after a crash midway
    gives the same result.
    """
    dataset = graph.flows[carrier].target
    old = layout.checkpoint(dataset, carrier)
    for name in carried_flows(layout, old):
        if name not in graph.flows:
            continue
        own = layout.checkpoint(graph.flows[name].target, name)
        if (by := layout.carrier(own)) is None or by.path != old.path:
            continue  # positioned already, or rebuilt by a full refresh
        record = {"table": dataset, "version": position_after_carry(layout, own, old)}
        layout.fs.write_text(layout.checkpoint(own.dataset, name, own.generation + 1).starts_at,
                             json.dumps(record))
    written = written_batch(layout, layout.table(dataset), [old.app_id(layout.query_id(old))])
    new = layout.start_generation(dataset, carrier, old.generation + 1)
    move = {"generation": old.generation, "branches": 1 + len(carried_flows(layout, old)), "written": written}
    layout.fs.write_text(new.left_from, json.dumps(move))
    _copy(layout, new, move)
    return new


def finish_leaving(layout: StorageLayout, graph: PipelineGraph) -> None:
    """Finish the moves of :func:`leave` and :func:`join` that a crash interrupted."""
    for flow in graph.flows.values():
        checkpoint = layout.checkpoint(flow.target, flow.name)
        text = layout.fs.read_text(checkpoint.left_from)
        if text is not None:
            _copy(layout, checkpoint, json.loads(text))
        text = layout.fs.read_text(checkpoint.joined_from)
        if text is not None:
            _join(layout, graph, checkpoint, json.loads(text))


def joining(resolver: ResolvedGraph, layout: StorageLayout, selected: Collection[str],
            refreshing: Collection[str], trigger_of: Callable[[str], Trigger]) -> dict[str, list[str]]:
    """Flows that ran alone and can join their upstream flow's query again: carrier -> flows.

    A flow joins when it qualifies (:func:`~deltaflow.sinks.carry.carrier_of`), both it and its upstream
    flow run in this run, are not rebuilt, carry and are carried by nothing, have no batch in flight, and
    the flow has read every version of the upstream table: then its whole position (it keeps no state)
    is the carrier's, and nothing is read twice or missed.
    """
    from deltaflow.runtime.checkpoints import unfinished_batch

    graph, found = resolver.graph, dict[str, list[str]]()
    for flow in graph.flows.values():
        upstream, _ = carrier_of(resolver, flow.name)
        if (not carrying() or upstream is None or trigger_of(upstream) != trigger_of(flow.name)
                or not {flow.target, graph.flows[upstream].target} <= set(selected)
                or {flow.target, graph.flows[upstream].target} & set(refreshing)):
            continue
        carrier = layout.checkpoint(graph.flows[upstream].target, upstream)
        own = layout.checkpoint(flow.target, flow.name)
        if (any(layout.carrier(c) is not None or carried_flows(layout, c) for c in (carrier, own))
                or _fresh(layout, carrier) or unfinished_batch(layout.fs, carrier) is not None):
            continue
        latest = layout.open_table(layout.table(carrier.dataset)).version()
        if _read_up_to(layout, own, carrier.dataset) == latest:
            found.setdefault(upstream, []).append(flow.name)
    return found


def join_caught_up(resolver: ResolvedGraph, layout: StorageLayout, selected: Collection[str],
                   refreshing: Collection[str], trigger_of: Callable[[str], Trigger]) -> dict[str, list[str]]:
    """:func:`join` the flows :func:`joining` finds to their carriers; returns them."""
    found = joining(resolver, layout, selected, refreshing, trigger_of)
    for carrier, flows in found.items():
        join(layout, resolver.graph, carrier, flows)
    return found


def _read_up_to(layout: StorageLayout, own: FlowCheckpoint, table: str) -> int | None:
    """The newest version of ``table`` that the flow at ``own`` has read all of (None: not known)."""
    from deltaflow.runtime.checkpoints import unfinished_batch

    if (start := layout.start_of(own)) is not None:
        return start[1] - 1 if start[0] == table else None
    committed = [int(n) for n in layout.fs.list(own.commits) if n.isdigit()]
    if not committed or unfinished_batch(layout.fs, own) is not None:
        return None
    table_id = str(layout.open_table(layout.table(table)).metadata().id)
    lines = (layout.fs.read_text(f"{own.offsets}/{max(committed)}") or "").splitlines()[2:]
    offsets = [json.loads(line) for line in lines if line.startswith("{")]
    if len(offsets) != 1 or offsets[0].get("reservoirId") != table_id or offsets[0].get("isStartingVersion"):
        return None
    # after a whole version v, Delta's source stands at (v + 1, index -1)
    return int(offsets[0]["reservoirVersion"]) - 1 if int(offsets[0].get("index", 0)) == -1 else None


def join(layout: StorageLayout, graph: PipelineGraph, carrier: str, flows: list[str]) -> FlowCheckpoint:
    """Make ``carrier``'s next generation carry ``flows`` from where they stand (see :func:`joining`).

    The carrier's checkpoint is copied with its last committed batch's offsets given once per branch
    (each carried flow reads the carrier's sources from where the carrier stands), its sources' logs too;
    then each flow moves to a new generation carried by it. The join is recorded in the carrier's new
    generation first and finished by the next run if a crash interrupts it (:func:`finish_leaving`).
    """
    dataset = graph.flows[carrier].target
    old = layout.checkpoint(dataset, carrier)
    new = layout.checkpoint(dataset, carrier, old.generation + 1)
    read = layout.open_table(layout.table(dataset)).version()
    record = {"generation": old.generation, "read": read,
              "flows": {f: layout.current_generation(graph.flows[f].target, f) for f in flows}}
    layout.fs.write_text(new.joined_from, json.dumps(record))
    _join(layout, graph, new, record)
    return new


def _join(layout: StorageLayout, graph: PipelineGraph, new: FlowCheckpoint, record: dict[str, Any]) -> None:
    from deltaflow.runtime.checkpoints import copy_with_branches

    old = layout.checkpoint(new.dataset, new.flow, int(record["generation"]))
    flows: dict[str, int] = record["flows"]
    copy_with_branches(layout.fs, old, new, 1 + len(flows))
    carried = []
    for name, generation in flows.items():
        target = graph.flows[name].target
        if layout.current_generation(target, name) == generation:
            layout.start_generation(target, name, generation + 1)
        carried.append(layout.checkpoint(target, name, generation + 1))
    record_carry(layout, new, carried, {name: int(record["read"]) + 1 for name in flows})
    layout.fs.delete(new.joined_from)


def _copy(layout: StorageLayout, new: FlowCheckpoint, move: dict[str, int | None]) -> None:
    old = layout.checkpoint(new.dataset, new.flow, int(move["generation"] or 0))
    copy_own_sources(layout.fs, old, new, int(move["branches"] or 1), move["written"])
    layout.fs.delete(new.left_from)


def plan_carries(resolver: ResolvedGraph, layout: StorageLayout, selected: Collection[str],
                 refreshing: Collection[str], trigger_of: Callable[[str], Trigger]) -> CarryPlan:
    """The run's carriers (see the module), given the selected and the fully refreshed datasets."""
    graph = resolver.graph
    plan = CarryPlan({u: list(ds) for u, ds in recorded_carriers(layout, graph, selected).items()})
    for flow in graph.flows.values():
        if (not carrying() or flow.target not in selected or flow.target in refreshing
                or flow.name in plan.carried):
            continue
        upstream, _ = carrier_of(resolver, flow.name)
        if (upstream is None or trigger_of(upstream) != trigger_of(flow.name) or upstream in plan.carried
                or graph.flows[upstream].target not in selected):
            continue
        carrier = layout.checkpoint(graph.flows[upstream].target, upstream)
        if _fresh(layout, layout.checkpoint(flow.target, flow.name)) and _fresh(layout, carrier):
            plan.carriers.setdefault(upstream, []).append(flow.name)
    for carried in plan.carried:  # a carried flow carries nothing itself
        plan.carriers.pop(carried, None)
    return plan


def _fresh(layout: StorageLayout, checkpoint: FlowCheckpoint) -> bool:
    return not any(name.isdigit() for name in layout.fs.list(checkpoint.commits))
