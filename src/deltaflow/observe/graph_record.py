"""The resolved dataset graph, written by each run so that readers without Spark can draw it.

Which datasets a flow reads is only known once its function has run on Spark, so ``deltaflow ui`` (no JVM,
maybe on another machine) reads what the last run resolved: ``StorageLayout.graph_record``, the JSON of
``deltaflow graph --format json`` plus the pipeline's name and the run's trigger. It holds names, kinds,
definition locations and source labels (``kafka:clicks``, ``files:/landing``), never a spec value.

Examples:
    >>> record = read_graph_record(layout)  # doctest: +SKIP
    >>> [d["dataset"] for d in record["datasets"]]  # doctest: +SKIP
    ['bronze_clicks', 'silver_clicks', 'gold_hourly']

"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from deltaflow.storage import StorageLayout

if TYPE_CHECKING:
    from deltaflow.resolve.resolved import ResolvedGraph


def write_graph_record(layout: StorageLayout, resolver: ResolvedGraph, pipeline: str, trigger: str,
                       fingerprint: str) -> None:
    """Record ``resolver``'s graph for readers without Spark, with the definitions' ``fingerprint``."""
    from deltaflow.observe.graph_picture import picture

    record = {"pipeline": pipeline, "trigger": trigger, "written_at": datetime.now(UTC).isoformat(),
              "fingerprint": fingerprint, **picture(resolver)}
    layout.fs.write_text(layout.graph_record, json.dumps(record, indent=1) + "\n")


def read_graph_record(layout: StorageLayout) -> dict[str, Any] | None:
    """The graph the last run recorded (None before a run has resolved the pipeline)."""
    text = layout.fs.read_text(layout.graph_record)
    if not text:
        return None
    try:
        record = json.loads(text)
    except ValueError:  # half-written by a run killed mid-write: the next run writes it again
        return None
    return record if isinstance(record, dict) else None


def flow_locations(record: Mapping[str, Any] | None) -> dict[str, tuple[str, str]]:
    """Each flow's dataset and definition ``file:line``, from a graph record.

    Examples:
        >>> flow_locations({"datasets": [{"dataset": "b", "flows": [{"flow": "b", "location": "b.py:3"}]}]})
        {'b': ('b', 'b.py:3')}

    """
    return {flow["flow"]: (dataset["dataset"], flow["location"])
            for dataset in (record or {}).get("datasets", []) for flow in dataset.get("flows", [])}


def layered(record: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The graph's nodes with a column (longest path from a source) and a row, and its edges.

    Outside sources (``kafka:clicks``) are nodes of kind ``source`` in column 0; a table whose flows
    quarantine rows has its quarantine table (kind ``quarantine``) in the column after it.

    Examples:
        >>> nodes, edges = layered({"datasets": [
        ...     {"dataset": "b", "kind": "table", "flows": [{"flow": "b", "sources": ["kafka:t"]}]},
        ...     {"dataset": "s", "kind": "table", "flows": [{"flow": "s", "inputs": {"b": "stream"}}]}]})
        >>> [(n["id"], n["column"], n["row"]) for n in nodes]
        [('kafka:t', 0, 0), ('b', 1, 0), ('s', 2, 0)]

    """
    datasets = {d["dataset"]: d for d in record.get("datasets", [])}
    edges: list[dict[str, Any]] = []
    for name, dataset in datasets.items():
        for flow in dataset.get("flows", []):
            via = "" if flow["flow"] == name else f"flow {flow['flow']}"
            edges += [{"from": source, "to": name, "label": via} for source in flow.get("sources", [])]
            edges += [{"from": upstream, "to": name, "label": ", ".join(p for p in (mode, via) if p)}
                      for upstream, mode in flow.get("inputs", {}).items()]
    quarantines = {StorageLayout.quarantine_name(name): name for name in datasets
                   if any(f.get("quarantines") for f in datasets[name].get("flows", []))}
    edges += [{"from": table, "to": quarantine, "label": "quarantined rows"}
              for quarantine, table in quarantines.items()]
    column: dict[str, int] = {}

    def depth(node: str, seen: frozenset[str] = frozenset()) -> int:
        if node not in column:
            ups = [e["from"] for e in edges if e["to"] == node and e["from"] not in seen]
            column[node] = max((depth(u, seen | {node}) + 1 for u in ups), default=0)
        return column[node]

    names = [e["from"] for e in edges if e["from"] not in datasets]
    ordered = list(dict.fromkeys([*names, *datasets, *quarantines]))
    rows: dict[int, int] = {}
    nodes = []
    for node in ordered:
        col = depth(node)
        dataset = datasets.get(node)
        kind = dataset["kind"] if dataset else "quarantine" if node in quarantines else "source"
        nodes.append({"id": node, "kind": kind, "column": col,
                      "row": rows.setdefault(col, 0), "flows": [f["flow"] for f in (dataset or {}).get(
                          "flows", [])]})
        rows[col] += 1
    return nodes, edges
