"""A plain-Python reference model of auto CDC, computed from the whole change log at once.

It knows nothing of batches, arrival order or Spark: SCD type 1 is each key's event with the highest
sequence (gone when that event is a delete); SCD type 2 is one version per distinct upsert sequence, ended
by the key's next event.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

Event = Mapping[str, Any]
#: The columns of ``deltaflow.dev.sample_data.customer_changes`` that the model keeps (not ``op``).
COLUMNS = ["customer_id", "seq", "name", "email", "tier", "city"]


def _by_key(events: Iterable[Event], key: str) -> dict[Any, list[Event]]:
    grouped: dict[Any, dict[int, Event]] = defaultdict(dict)
    for event in events:
        seen = grouped[event[key]].get(event["seq"])
        if seen is None or event["op"] == "DELETE":  # a delete wins a tie, as in one batch
            grouped[event[key]][event["seq"]] = event
    return {k: [v[s] for s in sorted(v)] for k, v in grouped.items()}


def _row(event: Event, columns: Iterable[str]) -> dict[str, Any]:
    return {c: event[c] for c in columns}


def scd1(events: Iterable[Event], key: str, columns: list[str]) -> dict[Any, dict[str, Any]]:
    """The latest row per key."""
    return {k: _row(history[-1], columns) for k, history in _by_key(events, key).items()
            if history[-1]["op"] != "DELETE"}


def replay(changes: Iterable[Event], key: str, columns: list[str]) -> list[dict[str, Any]]:
    """The table a change feed leads to: its changes applied in commit order, sorted by key.

    Raises:
        KeyError: A delete of a row that is not there (a change seen twice, or one missing).

    """
    table: dict[Any, dict[str, Any]] = {}
    for change in sorted(changes, key=lambda r: r["_commit_version"]):
        if change["_change_type"] in ("insert", "update_postimage"):
            table[change[key]] = _row(change, columns)
        elif change["_change_type"] == "delete":
            table.pop(change[key])
    return [table[k] for k in sorted(table)]


def scd2(events: Iterable[Event], key: str, columns: list[str]) -> list[dict[str, Any]]:
    """Every version, with ``__START_AT`` / ``__END_AT``, sorted by key and start."""
    versions = []
    for _, history in sorted(_by_key(events, key).items()):
        for i, event in enumerate(history):
            if event["op"] != "DELETE":
                end = history[i + 1]["seq"] if i + 1 < len(history) else None
                versions.append({**_row(event, columns), "__START_AT": event["seq"], "__END_AT": end})
    return versions
