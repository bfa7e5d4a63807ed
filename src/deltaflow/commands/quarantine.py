"""``deltaflow quarantine TABLE``: what a table's quarantine holds, by reason, read without Spark.

Examples:
    >>> report = quarantine_report(layout, "silver_events")  # doctest: +SKIP
    >>> report.reasons
    {'malformed_json': 120, 'missing_field:user_id': 31}

"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deltaflow.commands.tables import query_rows
from deltaflow.define.graph import suggest
from deltaflow.errors import ConfigError

if TYPE_CHECKING:
    from deltaflow.define.graph import PipelineGraph
    from deltaflow.storage import StorageLayout

_COLUMNS = ["flow", "batch_id", "quarantined_at", "failed_expectations", "record", "topic", "partition",
            "offset", "source_file"]


@dataclass(frozen=True)
class QuarantineReport:
    """A quarantine table's rows counted by reason, with a few samples of each."""

    table: str
    rows: int
    reasons: dict[str, int]
    samples: dict[str, list[dict[str, Any]]]


def quarantine_report(layout: StorageLayout, table: str, samples: int = 3) -> QuarantineReport:
    """Count ``table``'s quarantined rows by reason (a row failing two rules counts under both).

    Raises:
        ConfigError: ``table`` has no quarantine (it has no quarantine rules, or never quarantined a row).

    """
    from deltalake.exceptions import TableNotFoundError

    try:
        delta = layout.open_table(layout.quarantine(table))
    except TableNotFoundError:
        known = layout.quarantined_tables()
        raise ConfigError(f"table '{table}' has no quarantine{suggest(table, known)}",
                          hint="tables with one: " + (", ".join(known) or "none")) from None
    rows = query_rows(delta, _COLUMNS)
    reasons: Counter[str] = Counter()
    examples: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: r["quarantined_at"], reverse=True):
        for reason in row["failed_expectations"] or ["(none)"]:
            reasons[reason] += 1
            if len(examples.setdefault(reason, [])) < samples:
                examples[reason].append(row)
    return QuarantineReport(table, len(rows), dict(reasons.most_common()), examples)


def quarantines(graph: PipelineGraph, layout: StorageLayout, table: str) -> bool:
    """Whether a flow into ``table`` declares a quarantine (a rule, or ``dp.parse_json`` in the last run)."""
    from deltaflow.define.expectations import expectations_of
    from deltaflow.observe.graph_record import read_graph_record

    flows = [f for f in graph.flows.values() if f.target == table]
    if any(e.action == "quarantine" for f in flows for e in expectations_of(f.func)):
        return True
    record = read_graph_record(layout) or {}
    return any(flow.get("quarantines") for d in record.get("datasets", []) if d.get("dataset") == table
               for flow in d.get("flows", []))


def source_position(row: dict[str, object]) -> str:
    """Where a quarantined row came from: ``topic/partition@offset``, or its file."""
    if row.get("topic") is not None:
        return f"{row['topic']}/{row['partition']}@{row['offset']}"
    return str(row.get("source_file") or "-")


def record_text(row: dict[str, object]) -> str:
    """A quarantined row's record as text; a null record says so rather than printing nothing."""
    return "(none: the record was null)" if row.get("record") is None else str(row["record"])
