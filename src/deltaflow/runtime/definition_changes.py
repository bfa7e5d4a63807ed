"""Which datasets' definitions changed since the last run, and the record each run leaves of them.

Each run records every dataset's definition fingerprint (:mod:`deltaflow.define.fingerprints`) in
``StorageLayout.definitions_record``, once it has asked for what the changes need. The next run compares:

* a materialized view whose definition changed is rebuilt in full (one atomic commit, through the full
  refresh, recorded before it starts and so finished by the next run if this one is killed);
* a streaming table whose definition changed keeps its rows, and new rows follow the new definition: the
  run says so once, with the command that rebuilds them.

A run that runs only part of the pipeline (``--refresh``) records only the datasets it ran: a change to
another stays to be applied. With nothing recorded (a first run) nothing counts as changed.

Examples:
    >>> changes = DefinitionChanges.since_last_run(layout, graph, spec)  # doctest: +SKIP
    >>> changes.changed  # doctest: +SKIP
    ['gold_actions']

"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from deltaflow.define.fingerprints import dataset_fingerprints

if TYPE_CHECKING:
    from deltaflow.define.graph import PipelineGraph
    from deltaflow.runtime.outcomes import MessageCallback
    from deltaflow.spec import Spec
    from deltaflow.storage import StorageLayout

DefinitionState = Literal["changed", "unchanged", "new", "removed"]


def fingerprints_of(graph: PipelineGraph, spec: Spec) -> dict[str, str]:
    """The graph's dataset fingerprints: the loader's, else computed now (a graph built by hand)."""
    if not graph.fingerprints and graph.datasets:
        graph.fingerprints = dataset_fingerprints(graph, spec.root, spec.parameters)
    return graph.fingerprints


def read_definitions_record(layout: StorageLayout) -> dict[str, Any] | None:
    """The definitions record of the runs so far (None before the first, or when unreadable)."""
    try:
        text = layout.fs.read_text(layout.definitions_record)
        record = json.loads(text) if text else None
    except (ValueError, OSError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("datasets"), dict) else None


def planned_messages(layout: StorageLayout, graph: PipelineGraph, spec: Spec) -> list[str]:
    """What the next run will say of changed definitions (``dry-run``); nothing if the storage is unreadable.

    Examples:
        >>> planned_messages(layout, graph, spec)  # doctest: +SKIP
        ['gold_actions: definition changed: the next run rebuilds it in full']

    """
    from deltaflow.errors import DeltaflowError

    try:
        changes = DefinitionChanges.since_last_run(layout, graph, spec)
    except DeltaflowError:  # a storage that does not answer: dry-run does not need it
        return []
    return changes.messages([n for n, d in graph.datasets.items() if d.runs], planned=True)


def stays_message(table: str) -> str:
    """What a run says of a streaming table whose definition changed."""
    return (f"{table}: definition changed: rows written before keep the old definition; "
            f"deltaflow run --full-refresh {table} rebuilds them")


@dataclass(frozen=True)
class DefinitionChanges:
    """The definitions now against those the runs so far recorded.

    Attributes:
        current: Each dataset's fingerprint now.
        kinds: Each dataset's kind now.
        recorded: Each dataset's fingerprint as recorded (None: nothing recorded, a first run).
        recorded_kinds: The kinds recorded (for datasets since removed).
        written_at: When the record was written (ISO 8601), or None.

    Examples:
        >>> DefinitionChanges({"a": "1", "b": "2"}, {"a": "table", "b": "table"}, {"a": "0"}).state("a")
        'changed'

    """

    current: Mapping[str, str]
    kinds: Mapping[str, str]
    recorded: Mapping[str, str] | None = None
    recorded_kinds: Mapping[str, str] | None = None
    written_at: str | None = None

    @classmethod
    def since_last_run(cls, layout: StorageLayout, graph: PipelineGraph, spec: Spec) -> DefinitionChanges:
        """Compare ``graph``'s definitions with the record in ``layout``."""
        kinds = {name: dataset.kind for name, dataset in graph.datasets.items()}
        record = read_definitions_record(layout)
        if record is None:
            return cls(fingerprints_of(graph, spec), kinds)
        entries = {str(k): v for k, v in record["datasets"].items() if isinstance(v, dict)}
        prints = {k: str(v.get("fingerprint")) for k, v in entries.items()}
        recorded_kinds = {k: str(v.get("kind")) for k, v in entries.items()}
        return cls(fingerprints_of(graph, spec), kinds, prints, recorded_kinds, record.get("written_at"))

    def state(self, dataset: str) -> DefinitionState:
        """``dataset``'s definition against the record: changed, unchanged, new (not recorded) or removed."""
        if dataset not in self.current:
            return "removed"
        if self.recorded is None or dataset not in self.recorded:
            return "new"
        return "unchanged" if self.recorded[dataset] == self.current[dataset] else "changed"

    @property
    def changed(self) -> list[str]:
        """The datasets whose definition changed since it was recorded, by name."""
        return sorted(d for d in self.current if self.state(d) == "changed")

    @property
    def removed(self) -> list[str]:
        """The datasets recorded that are no longer defined."""
        return sorted(set(self.recorded or ()) - set(self.current))

    def views(self, selected: Collection[str]) -> set[str]:
        """The materialized views of ``selected`` to rebuild in full: their definition changed."""
        return {d for d in self.changed if d in selected and self.kinds[d] == "materialized_view"}

    def messages(self, selected: Collection[str], refreshing: Collection[str] = (), *,
                 planned: bool = False) -> list[str]:
        """One line per changed view or streaming table of ``selected`` (``refreshing``: rebuilt anyway).

        ``planned``: said before a run (``dry-run``), of what the next run does.
        """
        lines = []
        for name in self.changed:
            if name not in selected:
                continue
            if self.kinds[name] == "materialized_view":
                lines.append(f"{name}: definition changed: "
                             f"{'the next run rebuilds it in full' if planned else 'rebuilt in full'}")
            elif self.kinds[name] == "table" and name not in refreshing:
                lines.append(stays_message(name))
        return lines

    def record(self, layout: StorageLayout, selected: Collection[str], refreshing: Collection[str],
               on_message: MessageCallback) -> None:
        """Say what changed, and record ``selected``'s definitions (and temporary views') as this run's.

        Call it once the rebuilds the changes need are recorded: a run killed before this line applies the
        changes again; one killed after it finishes the recorded rebuilds.
        """
        for line in self.messages(selected, refreshing):
            on_message(line)
        recorded, kinds = self.recorded or {}, self.recorded_kinds or {}
        datasets: dict[str, dict[str, str]] = {}
        for name in sorted(self.current):
            if name in selected or self.kinds[name] == "temporary_view":
                datasets[name] = {"kind": self.kinds[name], "fingerprint": self.current[name]}
            elif name in recorded:  # not run this time: a change to it is still to be applied
                datasets[name] = {"kind": kinds.get(name, self.kinds[name]), "fingerprint": recorded[name]}
        if self.recorded is not None and datasets == {n: {"kind": kinds.get(n, ""), "fingerprint": f}
                                                      for n, f in recorded.items()}:
            return  # nothing new to record: the storage is not written
        record = {"written_at": datetime.now(UTC).isoformat(), "datasets": datasets}
        layout.fs.write_text(layout.definitions_record, json.dumps(record, indent=1) + "\n")
