"""Pictures of a resolved pipeline: plain text, JSON, Mermaid and Graphviz DOT (``deltaflow graph``).

Examples:
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

from deltaflow.observe.graph_picture import Picture, picture

if TYPE_CHECKING:
    from deltaflow.resolve.resolved import ResolvedGraph as Resolver


def text(graph: Resolver | Picture) -> str:
    """One block per dataset, upstream first: its kind, location, and what it reads."""
    datasets = picture(graph)["datasets"]
    width = max(len(d["dataset"]) for d in datasets)
    lines = []
    for d in datasets:
        lines.append(f"{d['dataset']:<{width}}  {d['label']}  {d['location']}")
        for edge in d["edges"]:
            lines.append(f"  <- {edge['from']}" + (f" ({edge['via']})" if edge["via"] else ""))
    return "\n".join(lines)


def _node_id(name: str) -> str:
    return re.sub(r"\W", "_", name)


def mermaid(graph: Resolver | Picture) -> str:
    """A Mermaid flowchart (paste into Markdown between ```mermaid fences)."""
    datasets = picture(graph)["datasets"]
    lines = ["flowchart LR"]
    sources: dict[str, str] = {}
    for d in datasets:
        shape = ("[(", ")]") if d["stored"] else ("([", "])")
        lines.append(f'  {_node_id(d["dataset"])}{shape[0]}"{d["dataset"]}<br/><small>{d["label"]}</small>"'
                     f'{shape[1]}')
    for d in datasets:
        for edge in d["edges"]:
            source, via = edge["from"], edge["via"]
            if not edge["dataset"] and source not in sources:
                sources[source] = f"src{len(sources)}"
                lines.insert(1, f'  {sources[source]}>"{source}"]')
            start = _node_id(source) if edge["dataset"] else sources[source]
            arrow = "-.->" if via.startswith("batch") else "-->"
            lines.append(f"  {start} {arrow}{f'|{via}|' if via else ''} {_node_id(d['dataset'])}")
    return "\n".join(lines)


def dot(graph: Resolver | Picture) -> str:
    """A Graphviz digraph (``deltaflow graph --format dot | dot -Tsvg > graph.svg``)."""
    lines = ["digraph pipeline {", "  rankdir=LR;", "  node [fontname=Helvetica];"]
    datasets = picture(graph)["datasets"]
    for d in datasets:
        shape = "cylinder" if d["stored"] else "box"
        lines.append(f'  "{d["dataset"]}" [shape={shape}, label="{d["dataset"]}\\n{d["label"]}"];')
    for d in datasets:
        for edge in d["edges"]:
            if not edge["dataset"]:
                lines.append(f'  "{edge["from"]}" [shape=cds];')
            style = ", style=dashed" if edge["via"].startswith("batch") else ""
            lines.append(f'  "{edge["from"]}" -> "{d["dataset"]}" [label="{edge["via"]}"{style}];')
    lines.append("}")
    return "\n".join(lines)


def as_json(graph: Resolver | Picture) -> str:
    """One JSON object: each dataset (upstream first) with its kind, location, label, flows and inputs."""
    return json.dumps(picture(graph))


FORMATS = {"text": text, "json": as_json, "mermaid": mermaid, "dot": dot}
