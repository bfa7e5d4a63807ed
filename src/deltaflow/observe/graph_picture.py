"""A resolved graph as plain data (a picture), for the pictures ``deltaflow graph`` draws and the runs record.

Each dataset, upstream first, with its kind, its label (how its rows are written: the execution path each
micro-batch takes), its definition's location, its flows and its edges (what it reads, and how). A run
writes it into its graph record (:mod:`deltaflow.observe.graph_record`), so that ``graph`` on unchanged
definitions, ``status`` and the dashboard have it without Spark.

Examples:
    >>> picture({"datasets": []})
    {'datasets': []}

"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deltaflow.define.graph import KIND_LABELS

if TYPE_CHECKING:
    from deltaflow.resolve.resolved import ResolvedGraph as Resolver


def _label(resolver: Resolver, name: str) -> str:
    """The dataset's kind and how its rows are written (the execution path each micro-batch takes)."""
    kind = KIND_LABELS[resolver.kinds[name]]
    refresh = resolver.graph.datasets[name].refresh
    if resolver.kinds[name] == "materialized_view":
        if refresh is None:
            return f"{kind}, recomputed whole at each batch of its inputs"
        from deltaflow.sinks.incremental_plan import plan_view

        plan = plan_view(resolver, name)
        how = plan.describe() if not isinstance(plan, str) else f"windows recomputed: {plan}"
        return f"{kind}, by window {refresh.column} {refresh.duration}, {how}"
    if resolver.kinds[name] == "table":
        ways = sorted({_writer(resolver, flow.name) for flow in resolver.graph.flows_into(name)})
        return f"{kind}, {' and '.join(ways)}" if ways else kind
    return kind


def _writer(resolver: Resolver, flow: str) -> str:
    """How a flow into a streaming table writes it (see :mod:`deltaflow.sinks.writer`)."""
    if (cdc := resolver.graph.flows[flow].cdc) is not None:
        if cdc.scd_type == 2:
            return "one MERGE per batch, the touched keys' history rebuilt"
        return "one MERGE per batch from one pass over it (tombstones read from the same pass)"
    if resolver.flows[flow].quarantines:
        return "rows and quarantine in one foreachBatch"
    from deltaflow.sinks.carry import carrier_of

    if (carrier := carrier_of(resolver, flow)[0]) is not None:
        return f"written from {carrier}'s micro-batches (one query for both, no hop between)"
    carried = sorted(f for f in resolver.flows if f != flow and carrier_of(resolver, f)[0] == flow)
    if carried:
        return f"one foreachBatch that also writes {', '.join(carried)}'s rows"
    if resolver.graph.datasets[resolver.graph.flows[flow].target].merge_schema:
        return "Delta's streaming sink (it evolves the schema)"
    return "one append per batch (its stamp checked in the table's checksum)"


def _edges(resolver: Resolver, name: str) -> list[tuple[str, str, bool]]:
    """(source, via, is_dataset) for each input of ``name``: datasets read, then outside sources."""
    edges = []
    for flow in resolver.graph.flows_into(name):
        resolved = resolver.flows[flow.name]
        via = "" if flow.name == name else f"flow {flow.name}"
        if (cdc := flow.cdc) is not None:
            how = (f"auto CDC, SCD type {cdc.scd_type}, keys {', '.join(cdc.keys)}, "
                   f"by {', '.join(cdc.sequence_by)}")
            via = f"{via}, {how}" if via else how
        edges += [(source, via, False) for source in resolved.sources]
        for upstream, mode in resolved.inputs.items():
            feed = "change feed" if upstream in resolved.changes else ""
            edges.append((upstream, ", ".join(p for p in (mode, feed, via) if p), True))
    return edges


#: A resolved graph as plain data: ``{"datasets": [{"dataset", "kind", "stored", "location", "label",
#: "flows", "edges": [{"from", "via", "dataset"}]}]}``, upstream first. ``deltaflow graph --format json``
#: prints it, each run records it (``observe.graph_record``), and the pictures below draw it, so that
#: ``graph`` on unchanged definitions draws the last run's without Spark.
Picture = dict[str, Any]


def picture(graph: Resolver | Picture) -> Picture:
    """The plain-data form of a resolved graph (a picture is returned as it is)."""
    if isinstance(graph, dict):
        return graph
    resolver = graph
    datasets = []
    for name in resolver.order():
        dataset = resolver.graph.datasets[name]
        flows = [{"flow": f.name, "location": str(f.location), "inputs": resolver.flows[f.name].inputs,
                  "sources": resolver.flows[f.name].sources,
                  "change_feeds": sorted(resolver.flows[f.name].changes),
                  "quarantines": resolver.flows[f.name].quarantines}
                 for f in resolver.graph.flows_into(name)]
        edges = [{"from": source, "via": via, "dataset": is_dataset}
                 for source, via, is_dataset in _edges(resolver, name)]
        datasets.append({"dataset": name, "kind": resolver.kinds[name], "stored": dataset.stored,
                         "location": str(dataset.location), "label": _label(resolver, name),
                         "flows": flows, "edges": edges})
    return {"datasets": datasets}


def drawable(record: Picture | None) -> bool:
    """Whether ``record`` (a run's graph record) holds what the pictures draw (older runs' do not)."""
    datasets = (record or {}).get("datasets")
    return bool(datasets) and all("label" in d and "edges" in d for d in datasets or ())
