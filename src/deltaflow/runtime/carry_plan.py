"""Which flows a run carries inside their upstream flow's query (see :mod:`deltaflow.sinks.carry`).

A run decides once, before it starts a flow:

* a carrier's checkpoint keeps carrying the flows it records while each still qualifies, with the same
  trigger, and none is fully refreshed;
* otherwise the carrier *leaves*: its checkpoint moves to a new generation holding its own sources'
  offsets alone (:func:`~deltaflow.runtime.checkpoints.copy_own_sources`), and the tables of every flow it
  carried are fully refreshed, so that each runs alone from then on, its state rebuilt from its input;
* a flow that qualifies, whose carrier's checkpoint and its own have no committed batch yet, becomes
  carried (both records are written before the carrier's query starts).

Example:
    >>> plan = plan_carries(resolver, layout, selected, set(), run.trigger_of)  # doctest: +SKIP
    >>> plan.carriers  # doctest: +SKIP
    {'bronze_clicks': ['silver_clicks']}

"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from deltaflow.runtime.checkpoint_repair import written_batch
from deltaflow.runtime.checkpoints import copy_own_sources
from deltaflow.sinks.carry import carried_flows, carrier_of

if TYPE_CHECKING:
    from deltaflow.graph import PipelineGraph
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
            trigger_of: Callable[[str], Trigger]) -> dict[str, list[str]]:
    """The recorded carriers that cannot go on carrying all their flows, each with the tables to rebuild."""
    graph = resolver.graph
    found = {}
    for carrier, flows in recorded.items():
        position = layout.checkpoint(graph.flows[carrier].target, carrier)
        stays = [d for d in flows
                 if carrier_of(resolver, d)[0] == carrier and trigger_of(d) == trigger_of(carrier)
                 and (c := layout.carrier(layout.checkpoint(graph.flows[d].target, d))) is not None
                 and c.path == position.path]
        if stays != carried_flows(layout, position):
            found[carrier] = [graph.flows[d].target for d in flows]
    return found


def leave(layout: StorageLayout, graph: PipelineGraph, carrier: str) -> FlowCheckpoint:
    """Move ``carrier`` to a new checkpoint generation without the flows it carried (see the module).

    The move is recorded in the new generation first, so that a run interrupted while copying copies
    again (:func:`finish_leaving`).
    """
    dataset = graph.flows[carrier].target
    old = layout.checkpoint(dataset, carrier)
    written = written_batch(layout, layout.table(dataset), [old.app_id(layout.query_id(old))])
    new = layout.start_generation(dataset, carrier, old.generation + 1)
    move = {"generation": old.generation, "branches": 1 + len(carried_flows(layout, old)), "written": written}
    layout.fs.write_text(new.left_from, json.dumps(move))
    _copy(layout, new, move)
    return new


def separate(layout: StorageLayout, graph: PipelineGraph, carrier: str, carried: list[str]) -> None:
    """End a carry now: the carried tables' full refreshes recorded, then the carrier moved.

    The next run rebuilds the carried tables, each flow alone; the carrier gets a checkpoint of its own
    (:func:`leave`).
    """
    from deltaflow.runtime.refresh import FullRefresh

    for target in dict.fromkeys(graph.flows[name].target for name in carried):
        FullRefresh(layout, target).request({f.name: layout.current_generation(target, f.name) + 1
                                             for f in graph.flows_into(target)})
    leave(layout, graph, carrier)


def finish_leaving(layout: StorageLayout, graph: PipelineGraph) -> None:
    """Finish the moves of :func:`leave` that a crash interrupted."""
    for flow in graph.flows.values():
        checkpoint = layout.checkpoint(flow.target, flow.name)
        text = layout.fs.read_text(checkpoint.left_from)
        if text is not None:
            _copy(layout, checkpoint, json.loads(text))


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
        if flow.target not in selected or flow.target in refreshing or flow.name in plan.carried:
            continue
        upstream, _ = carrier_of(resolver, flow.name)
        if upstream is None or trigger_of(upstream) != trigger_of(flow.name) or upstream in plan.carried:
            continue
        carrier = layout.checkpoint(graph.flows[upstream].target, upstream)
        if _fresh(layout, layout.checkpoint(flow.target, flow.name)) and _fresh(layout, carrier):
            plan.carriers.setdefault(upstream, []).append(flow.name)
    for carried in plan.carried:  # a carried flow carries nothing itself
        plan.carriers.pop(carried, None)
    return plan


def _fresh(layout: StorageLayout, checkpoint: FlowCheckpoint) -> bool:
    return not any(name.isdigit() for name in layout.fs.list(checkpoint.commits))
