"""Pictures of a resolved pipeline: plain text, JSON, Mermaid and Graphviz DOT (``deltaflow graph``).

Example:
    >>> print(text(resolver))  # doctest: +SKIP
    bronze_clicks  streaming table, one foreachBatch that also writes silver_clicks's rows  ...
      <- kafka:clicks
    silver_clicks  streaming table, written from bronze_clicks's micro-batches (one query for both, ...
      <- bronze_clicks (stream)

"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from deltaflow.graph import KIND_LABELS

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


def text(resolver: Resolver) -> str:
    """One block per dataset, upstream first: its kind, location, and what it reads."""
    names = resolver.order()
    width = max(len(n) for n in names)
    lines = []
    for name in names:
        dataset = resolver.graph.datasets[name]
        lines.append(f"{name:<{width}}  {_label(resolver, name)}  {dataset.location}")
        for source, via, _ in _edges(resolver, name):
            lines.append(f"  <- {source}" + (f" ({via})" if via else ""))
    return "\n".join(lines)


def _node_id(name: str) -> str:
    return re.sub(r"\W", "_", name)


def mermaid(resolver: Resolver) -> str:
    """A Mermaid flowchart (paste into Markdown between ```mermaid fences)."""
    lines = ["flowchart LR"]
    sources: dict[str, str] = {}
    for name in resolver.order():
        shape = ("[(", ")]") if resolver.graph.datasets[name].stored else ("([", "])")
        label = f"{name}<br/><small>{_label(resolver, name)}</small>"
        lines.append(f'  {_node_id(name)}{shape[0]}"{label}"{shape[1]}')
    for name in resolver.order():
        for source, via, is_dataset in _edges(resolver, name):
            if not is_dataset and source not in sources:
                sources[source] = f"src{len(sources)}"
                lines.insert(1, f'  {sources[source]}>"{source}"]')
            start = _node_id(source) if is_dataset else sources[source]
            arrow = "-.->" if via.startswith("batch") else "-->"
            lines.append(f"  {start} {arrow}{f'|{via}|' if via else ''} {_node_id(name)}")
    return "\n".join(lines)


def dot(resolver: Resolver) -> str:
    """A Graphviz digraph (``deltaflow graph --format dot | dot -Tsvg > graph.svg``)."""
    lines = ["digraph pipeline {", "  rankdir=LR;", "  node [fontname=Helvetica];"]
    for name in resolver.order():
        shape = "cylinder" if resolver.graph.datasets[name].stored else "box"
        lines.append(f'  "{name}" [shape={shape}, label="{name}\\n{_label(resolver, name)}"];')
    for name in resolver.order():
        for source, via, is_dataset in _edges(resolver, name):
            if not is_dataset:
                lines.append(f'  "{source}" [shape=cds];')
            style = ", style=dashed" if via.startswith("batch") else ""
            lines.append(f'  "{source}" -> "{name}" [label="{via}"{style}];')
    lines.append("}")
    return "\n".join(lines)


def as_json(resolver: Resolver) -> str:
    """One JSON object: each dataset (upstream first) with its kind, location, flows and inputs."""
    datasets = []
    for name in resolver.order():
        dataset = resolver.graph.datasets[name]
        flows = [{"flow": f.name, "location": str(f.location), "inputs": resolver.flows[f.name].inputs,
                  "sources": resolver.flows[f.name].sources,
                  "change_feeds": sorted(resolver.flows[f.name].changes),
                  "quarantines": resolver.flows[f.name].quarantines}
                 for f in resolver.graph.flows_into(name)]
        datasets.append({"dataset": name, "kind": resolver.kinds[name], "stored": dataset.stored,
                         "location": str(dataset.location), "flows": flows})
    return json.dumps({"datasets": datasets})


FORMATS = {"text": text, "json": as_json, "mermaid": mermaid, "dot": dot}
