"""``deltaflow plan``: what changed since the last run, and what the next run will do; nothing is written.

For each dataset, its definition against the one the last run recorded (changed, unchanged, new or removed;
see :mod:`deltaflow.runtime.definition_changes`), and what the next run does with it:

* **rebuild in full**: a materialized view whose definition changed, a full refresh left unfinished, the
  datasets downstream of a rewind left unfinished, and every dataset downstream of those;
* **refresh**: a dataset with new input, as far as it can be told without Spark (new files, new Kafka
  records, new versions of a table it streams, see :mod:`deltaflow.runtime.nothing_new`; a source that
  cannot be checked counts as new), and the datasets downstream of one;
* **leave alone**: the others.

A streaming table whose definition changed is refreshed as usual; its rows written before keep the old
definition, which the plan says with the command that rebuilds them. What reads what comes from the graph
the last run recorded (``StorageLayout.graph_record``). Needs no JVM when the definitions load without one.

Examples:
    >>> plan = pipeline_plan(spec, layout, graph, flows)  # doctest: +SKIP
    >>> [(d.dataset, d.definition, d.action) for d in plan.datasets]  # doctest: +SKIP
    [('bronze_events', 'unchanged', 'leave alone'), ('gold_actions', 'changed', 'rebuild in full')]

"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from deltaflow.define.graph import KIND_LABELS
from deltaflow.observe.graph_record import read_graph_record
from deltaflow.runtime.definition_changes import DefinitionChanges, DefinitionState, stays_message
from deltaflow.runtime.refresh import FullRefresh

if TYPE_CHECKING:
    from deltaflow.define.graph import Flow, PipelineGraph
    from deltaflow.spec import Spec
    from deltaflow.storage import StorageLayout

Action = Literal["rebuild in full", "refresh", "leave alone", "none"]
ACTIONS: tuple[Action, ...] = ("rebuild in full", "refresh", "leave alone")


@dataclass(frozen=True)
class DatasetPlan:
    """One dataset in a plan.

    Attributes:
        dataset: Its name.
        kind: ``table``, ``materialized_view``, ``temporary_view`` or ``sink``.
        definition: Its definition against the last run's: changed, unchanged, new or removed.
        action: What the next run does with it (``none``: a temporary view, inlined into its readers, or a
            removed dataset, which nothing runs).
        why: The reason for the action, when there is one.

    Examples:
        >>> DatasetPlan("gold", "materialized_view", "changed", "rebuild in full", "definition changed").why
        'definition changed'

    """

    dataset: str
    kind: str
    definition: DefinitionState
    action: Action
    why: str | None = None


@dataclass(frozen=True)
class Plan:
    """What changed since the last run, and what the next run does (see :func:`pipeline_plan`).

    Attributes:
        pipeline: The pipeline's name.
        recorded_at: When the definitions the comparison is against were recorded (None: never ran).
        datasets: Each dataset, by name.
        notes: One line per streaming table whose definition changed: its rows keep the old one.

    """

    pipeline: str
    recorded_at: str | None
    datasets: tuple[DatasetPlan, ...]
    notes: tuple[str, ...] = ()

    def doing(self, action: Action) -> list[DatasetPlan]:
        """The datasets the next run does ``action`` with."""
        return [d for d in self.datasets if d.action == action]

    def as_json(self) -> dict[str, Any]:
        """The plan as one JSON object (``deltaflow plan --json``)."""
        return {"pipeline": self.pipeline, "recorded_at": self.recorded_at,
                "datasets": [asdict(d) for d in self.datasets], "notes": list(self.notes)}

    def lines(self) -> list[str]:
        """The plan as text, for the terminal."""
        since = f"the run recorded at {self.recorded_at}" if self.recorded_at else "no run recorded yet"
        lines = [f"plan for pipeline '{self.pipeline}' (definitions compared with {since})", "definitions:"]
        for state in ("changed", "new", "removed", "unchanged"):
            names = [f"{d.dataset} ({KIND_LABELS.get(d.kind, d.kind)})" for d in self.datasets
                     if d.definition == state]
            if names:
                lines.append(f"  {state + ':':<11}{', '.join(names)}")
        lines.append("next run:")
        for action in ACTIONS:
            for item in self.doing(action):
                lines.append(f"  {action + ':':<17}{item.dataset}" + (f" ({item.why})" if item.why else ""))
        lines += [f"note: {note}" for note in self.notes]
        return lines


def pipeline_plan(spec: Spec, layout: StorageLayout, graph: PipelineGraph, flows: Sequence[Flow]) -> Plan:
    """The plan of the pipeline's next run; reads the storage, writes nothing.

    Args:
        spec: The pipeline's spec.
        layout: Its storage.
        graph: Its loaded definitions.
        flows: The flows a run starts.

    """
    from deltaflow.runtime.nothing_new import flows_input

    changes = DefinitionChanges.since_last_run(layout, graph, spec)
    running = [n for n, d in graph.datasets.items() if d.runs]
    downstream = _readers(read_graph_record(layout))
    actions: dict[str, tuple[Action, str | None]] = {}

    def mark(names: Iterable[str], action: Action, why: str) -> None:
        for name in names:
            if name in running and name not in actions:
                actions[name] = (action, why)

    if changes.recorded is None:
        mark(running, "refresh", "no run recorded yet")
    mark(changes.views(running), "rebuild in full", "definition changed")
    mark([d for d in running if FullRefresh(layout, d).pending() is not None], "rebuild in full",
         "a full refresh to finish")
    for table, rebuilt in _rewinds(layout).items():
        mark(rebuilt, "rebuild in full", f"downstream of '{table}', rewound")
        mark([table], "refresh", "a rewind to finish")
    _spread(actions, downstream, "rebuild in full", running)
    news = flows_input(spec, layout, flows) if changes.recorded is not None else {}
    for flow in flows:
        reason = news.get(flow.name)
        if reason is not None and reason.reason is not None:
            mark([flow.target], "refresh", f"flow '{flow.name}': {reason.reason}"
                 if flow.name != flow.target else reason.reason)
    mark([d for d in running if changes.state(d) == "new"], "refresh", "new: built by the next run")
    _spread(actions, downstream, "refresh", running)
    datasets = []
    for name in [*graph.datasets, *changes.removed]:  # in definition order
        kind = graph.datasets[name].kind if name in graph.datasets else (changes.recorded_kinds or {}).get(
            name, "table")
        action, why = actions.get(name, ("leave alone" if name in running else "none", None))
        datasets.append(DatasetPlan(name, kind, changes.state(name), action, why))
    notes = [stays_message(t) for t in changes.changed
             if graph.datasets[t].kind == "table" and actions.get(t, ("",))[0] != "rebuild in full"]
    return Plan(spec.name, changes.written_at, tuple(datasets), tuple(notes))


def _readers(record: Mapping[str, Any] | None) -> dict[str, set[str]]:
    """Which datasets read each dataset, as the last run resolved them."""
    readers: dict[str, set[str]] = {}
    for dataset in (record or {}).get("datasets", []):
        for flow in dataset.get("flows", []):
            for upstream in flow.get("inputs", {}):
                readers.setdefault(upstream, set()).add(dataset["dataset"])
    return readers


def _spread(actions: dict[str, tuple[Action, str | None]], readers: Mapping[str, set[str]], action: Action,
            running: Sequence[str]) -> None:
    """Give ``action`` to every dataset downstream of one that has it (keeping an action already given)."""
    queue = [name for name, (given, _) in actions.items() if given == action]
    while queue:
        upstream = queue.pop()
        for reader in sorted(readers.get(upstream, ())):
            if reader in running and reader not in actions:
                actions[reader] = (action, f"reads '{upstream}'")
                queue.append(reader)


def _rewinds(layout: StorageLayout) -> dict[str, list[str]]:
    """Each unfinished rewind's table, with the datasets it rebuilds."""
    found = {}
    for table in layout.rewound_tables():
        try:
            record = json.loads(layout.fs.read_text(layout.rewind_record(table)) or "{}")
        except ValueError:
            record = {}
        found[table] = sorted(record.get("rebuilt", {}))
    return found
