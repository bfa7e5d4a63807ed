"""``deltaflow rewind``: put a table back to an earlier version, and its flows back to where they were then.

Seed 004's recovery from a bug, done for a pipeline: the table is restored to the version (Delta's
RESTORE), each flow writing it moves to a new checkpoint generation holding its checkpoint as it stood
when that version was written (the offsets, commits and state of the batches up to it, see
:func:`~deltaflow.runtime.checkpoints.copy_until`), so the next run reads its sources again from there
through the current definition. The batches that run again write under a new ``txnAppId``, so Delta
does not skip them as already written. Whatever those batches had quarantined (the table's quarantine,
an auto CDC flow's tombstones) goes back with them.

A RESTORE re-adds files as new data, which a stream reading the table would take again; so every
dataset downstream is rebuilt by a full refresh (:mod:`deltaflow.runtime.refresh`) in the next run,
before any flow starts: readers see the old rows until the rebuilt ones replace them in one commit.

The rewind is recorded (``StorageLayout.rewind_record``) before anything changes, and every step can run
again: a rewind that was interrupted is finished by the next ``rewind`` or ``run``
(:func:`finish_rewinds`).

Examples:
    >>> result = rewind_table(resolver, "silver_readings", version=12)  # doctest: +SKIP
    >>> [(f.flow, f.batch) for f in result.flows], result.rebuilt
    ([('silver_readings', 7)], ['gold_sensor_windows'])

"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from deltaflow.commands.history import TableVersion, log_history, table_history
from deltaflow.commands.readers import checkpoint_position, commit_time
from deltaflow.commands.tables import open_table
from deltaflow.define.graph import suggest
from deltaflow.errors import ConfigError
from deltaflow.runtime.checkpoints import copy_until
from deltaflow.runtime.refresh import FullRefresh

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from deltaflow.pipeline import Pipeline
    from deltaflow.resolve.resolver import Resolver
    from deltaflow.storage import StorageLayout

#: Commits no flow wrote that replace a table's rows: a full refresh's (WRITE) or an earlier rewind's.
_REPLACING = {"RESTORE": "a rewind", "WRITE": "a full refresh"}


@dataclass(frozen=True)
class FlowRewind:
    """Where one flow writing the table goes back to.

    Attributes:
        flow: The flow.
        source_generation: Its checkpoint generation before the rewind.
        generation: The new generation, holding the checkpoint as of ``batch``.
        batch: The last batch kept (-1: none; the flow starts over).
        tombstones_version: The version its auto CDC tombstone table goes back to (None: none to restore).
        starts_at: For a flow that was written with its upstream flow's batches (carried), the upstream
            table and the version the new generation starts reading from (no checkpoint to copy).

    """

    flow: str
    source_generation: int
    generation: int
    batch: int
    tombstones_version: int | None = None
    starts_at: tuple[str, int | None] | None = None


@dataclass(frozen=True)
class Rewind:
    """A rewind of ``table``, recorded before it changes anything.

    Attributes:
        table: The table.
        version: The version it goes back to.
        latest: The version it was at.
        flows: The flows writing it that go back.
        quarantine_version: The version its quarantine goes back to (None: unchanged).
        rebuilt: The datasets downstream, each with its flows' new generations (a full refresh).
        resumed: Whether this finished a rewind an earlier call left unfinished.

    """

    table: str
    version: int
    latest: int
    flows: tuple[FlowRewind, ...]
    quarantine_version: int | None = None
    rebuilt: dict[str, dict[str, int]] = field(default_factory=dict)
    resumed: bool = False

    def as_json(self) -> dict[str, Any]:
        """The rewind as a JSON-ready dict."""
        return asdict(self)

    @classmethod
    def of_json(cls, data: dict[str, Any]) -> Rewind:
        """The rewind :meth:`as_json` gave."""
        flows = tuple(FlowRewind(**{**f, "starts_at": tuple(f["starts_at"]) if f.get("starts_at") else None})
                      for f in data["flows"])
        return cls(**{**data, "flows": flows})


def rewind_table(resolver: Resolver, table: str, version: int | None = None,
                 timestamp: datetime | None = None, running: Callable[[], set[str]] = set,
                 on_message: Callable[[str], None] = lambda m: None) -> Rewind:
    """Rewind ``table`` to ``version`` (or to the last version committed at or before ``timestamp``).

    Args:
        resolver: The resolved pipeline.
        table: A streaming table of the pipeline.
        version: The version to go back to.
        timestamp: Or the time (the version current then).
        running: The flows running now (a running flow cannot be moved).
        on_message: Told about each step.

    Raises:
        ConfigError: One line: no such table, a version it cannot go back to (and the one it can), a flow
            running, or a checkpoint that no longer holds the batch to go back to.

    """
    layout = resolver.context.layout
    for done in finish_rewinds(resolver.context.spark, layout, on_message):
        if done.table == table and _same_target(layout, done, version, timestamp):
            return done  # the same rewind, asked again after it was interrupted
    rewind = plan_rewind(resolver, table, version, timestamp, running())
    layout.fs.write_text(layout.rewind_record(table), json.dumps(rewind.as_json()))
    apply_rewind(resolver.context.spark, layout, rewind, on_message)
    return rewind


def running_flows(pipeline: Pipeline) -> set[str]:
    """The flows of ``pipeline`` running now, from its event log (none when it never ran)."""
    try:
        return {s.flow for s in pipeline.status() if s.state == "running"}
    except ConfigError:  # never ran
        return set()


def finish_rewinds(spark: SparkSession, layout: StorageLayout,
                   on_message: Callable[[str], None] = lambda m: None) -> list[Rewind]:
    """Finish every rewind an earlier call left unfinished (a run calls this before its flows start)."""
    finished = []
    for table in layout.rewound_tables():
        text = layout.fs.read_text(layout.rewind_record(table))
        if text is not None:
            rewind = Rewind.of_json({**json.loads(text), "resumed": True})
            on_message(f"{rewind.table}: finishing the rewind to version {rewind.version} left unfinished")
            apply_rewind(spark, layout, rewind, on_message)
            finished.append(rewind)
    return finished


def apply_rewind(spark: SparkSession, layout: StorageLayout, rewind: Rewind,
                 on_message: Callable[[str], None] = lambda m: None) -> None:
    """Carry out a recorded rewind; every step gives the same result when run again."""
    for dataset, generations in rewind.rebuilt.items():
        refresh = FullRefresh(layout, dataset)
        refresh.request(refresh.pending() or generations)
    for move in rewind.flows:
        target = layout.checkpoint(rewind.table, move.flow, move.generation)
        layout.fs.delete_tree(target.path)
        if move.starts_at is not None:
            table, version = move.starts_at
            layout.fs.write_text(target.starts_at, json.dumps({"table": table, "version": version}))
            continue
        if move.batch < 0:
            layout.start_generation(rewind.table, move.flow, move.generation)
            continue
        copy_until(layout.fs, layout.checkpoint(rewind.table, move.flow, move.source_generation), target,
                   move.batch)
        if move.tombstones_version is not None:
            _restore(spark, target.tombstones, move.tombstones_version)
    if rewind.quarantine_version is not None:
        _restore(spark, layout.quarantine(rewind.table), rewind.quarantine_version)
    _restore(spark, layout.table(rewind.table), rewind.version)
    layout.fs.delete(layout.rewind_record(rewind.table))
    on_message(f"{rewind.table}: restored to version {rewind.version}")


def plan_rewind(resolver: Resolver, table: str, version: int | None, timestamp: datetime | None,
                running: set[str]) -> Rewind:
    """What a rewind of ``table`` changes; nothing is changed. See :func:`rewind_table`."""
    layout, graph = resolver.context.layout, resolver.graph
    _check_rewindable(resolver, table)
    history = table_history(layout, table, limit=0)
    version = target_version(table, history, version, timestamp)
    busy = sorted(running & {f.name for d in resolver.downstream({table}) for f in graph.flows_into(d)})
    if busy:
        raise ConfigError(f"flow '{busy[0]}' is running; stop the pipeline before rewinding '{table}'",
                          location="rewind")
    flows = []
    for flow in graph.flows_into(table):
        generation = layout.current_generation(table, flow.name)
        mine = [v for v in history if v.flow == flow.name and v.batch_id is not None]
        if not any(v.version > version for v in mine):
            continue
        carried = _carried_move(layout, table, flow.name, generation, mine, version)
        if carried is not None:
            flows.append(carried)
            continue
        again = [v.batch_id for v in mine if v.generation == generation and v.version > version
                 and v.batch_id is not None]
        if again:
            flows.append(FlowRewind(flow.name, generation, generation + 1, min(again) - 1))
    flows = [_with_tombstones(resolver, table, f) for f in flows]
    for move in flows:
        _check_sources(resolver, table, move)
    _check_restorable(layout, layout.table(table), version)
    quarantine = _restore_point(layout, layout.quarantine(table), flows) \
        if layout.fs.is_dir(layout.quarantine(table)) else None
    below = resolver.downstream({table}) - {table}
    rebuilt = {d: {f.name: layout.current_generation(d, f.name) + 1 for f in graph.flows_into(d)}
               for d in resolver.order() if d in below and graph.datasets[d].runs}
    return Rewind(table, version, history[0].version, tuple(flows), quarantine, rebuilt)


def _carried_move(layout: StorageLayout, table: str, flow: str, generation: int, mine: list[TableVersion],
                  version: int) -> FlowRewind | None:
    """The move of a flow whose kept batches were written with its carrier's, else None.

    Such a flow keeps no state (:func:`~deltaflow.sinks.carry.carrier_of`), so its whole position is the
    version of the carrier's table after the carrier's batch that wrote the kept version.
    """
    from deltaflow.runtime.carry_plan import position_after_carry

    kept = [v for v in mine if v.version <= version]
    of = kept[0] if kept else mine[-1]  # (newest first) the batch kept, or else the first one written
    checkpoint = layout.checkpoint(table, flow, of.generation or 0)
    carrier = layout.carrier(checkpoint)
    if carrier is None:
        return None
    batch = int(of.batch_id) if kept and of.batch_id is not None else -1
    start = position_after_carry(layout, checkpoint, carrier, batch)
    return FlowRewind(flow, checkpoint.generation, generation + 1, batch, starts_at=(carrier.dataset, start))


def _same_target(layout: StorageLayout, rewind: Rewind, version: int | None,
                 timestamp: datetime | None) -> bool:
    """Whether ``version`` / ``timestamp`` name the version ``rewind`` went back to."""
    if timestamp is None:
        return version == rewind.version
    return _version_at(table_history(layout, rewind.table, limit=0), timestamp) == rewind.version


def _version_at(history: list[TableVersion], moment: datetime) -> int | None:
    """The newest version in ``history`` committed at or before ``moment`` (naive: UTC)."""
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return max((v.version for v in history if v.timestamp <= moment), default=None)


def _check_rewindable(resolver: Resolver, table: str) -> None:
    datasets = resolver.graph.datasets
    if table not in datasets:
        raise ConfigError(f"unknown table '{table}'{suggest(table, datasets)}", location="rewind",
                          hint="see 'deltaflow graph'")
    kind = resolver.kinds[table]
    if kind != "table" or datasets[table].handler is not None:
        raise ConfigError(f"'{table}' is a {kind.replace('_', ' ')}, not a streaming table; only those "
                          "are rewound", location="rewind",
                          hint="a materialized view is recomputed from what it reads: rewind those tables")


def target_version(table: str, history: list[TableVersion], version: int | None,
                    timestamp: datetime | None) -> int:
    """The version to go back to, checked against the log and the commits that replaced the table's rows."""
    if (version is None) == (timestamp is None):
        raise ConfigError("give a version or a timestamp to rewind to, not both", location="rewind")
    latest, oldest = history[0], history[-1]
    if timestamp is not None:
        version = _version_at(history, timestamp)
        if version is None:
            raise ConfigError(f"'{table}' has no version from {timestamp.isoformat()} or before; its log "
                              f"starts at version {oldest.version} ({oldest.timestamp.isoformat()})",
                              location="rewind")
    assert version is not None
    if version >= latest.version:
        raise ConfigError(f"'{table}' is at version {latest.version}; nothing to rewind to {version}",
                          location="rewind")
    if version < oldest.version:
        raise ConfigError(f"the log of '{table}' no longer holds version {version} (it starts at "
                          f"{oldest.version}, delta.logRetentionDuration)", location="rewind")
    replacing = [v for v in history if v.version > version and v.flow is None and v.operation in _REPLACING]
    if replacing:
        barrier = replacing[-1]
        raise ConfigError(f"'{table}' cannot go back past version {barrier.version}: "
                          f"{_REPLACING[barrier.operation]} replaced its rows there", location="rewind",
                          hint=f"rewind to version {barrier.version} or later")
    return version


def _with_tombstones(resolver: Resolver, table: str, move: FlowRewind) -> FlowRewind:
    """``move`` with the version its auto CDC tombstone table goes back to, if it has one."""
    layout = resolver.context.layout
    if resolver.graph.flows[move.flow].cdc is None or move.batch < 0:
        return move
    tombstones = layout.checkpoint(table, move.flow, move.source_generation).tombstones
    if not layout.fs.is_dir(tombstones):
        return move
    version = _restore_point(layout, tombstones, [move])
    return FlowRewind(**{**asdict(move), "tombstones_version": version})


def _restore_point(layout: StorageLayout, path: str, moves: list[FlowRewind]) -> int | None:
    """The version of the table at ``path`` before the first commit of a batch ``moves`` run again."""
    kept = {(m.flow, m.source_generation): m.batch for m in moves}
    history = log_history(layout, path, layout.open_table(path).version(), {})
    undone = [v.version for v in history if v.batch_id is not None
              and v.batch_id > kept.get((v.flow or "", v.generation or 0), v.batch_id)]
    if not undone:
        return None
    _check_restorable(layout, path, min(undone) - 1)
    return min(undone) - 1


def _check_sources(resolver: Resolver, table: str, move: FlowRewind) -> None:
    """Refuse a move whose Delta sources no longer hold the versions the flow would read again."""
    layout = resolver.context.layout
    if move.starts_at is not None:
        upstream, position = move.starts_at
        if (position is not None and position <= open_table(layout, upstream).version()
                and commit_time(layout, upstream, position) is None):
            raise ConfigError(f"flow '{move.flow}' would read '{upstream}' again from version {position}, "
                              f"which the log of '{upstream}' no longer holds", location="rewind",
                              hint="rewind to a later version, or full-refresh the table")
        return
    checkpoint = layout.checkpoint(table, move.flow, move.source_generation)
    for name, mode in resolver.flow_stored_inputs(move.flow).items():
        if mode != "stream" or move.batch < 0:
            continue
        position = checkpoint_position(layout, checkpoint, str(open_table(layout, name).metadata().id),
                                       move.batch)
        if (position is not None and position <= open_table(layout, name).version()  # else nothing to read
                and commit_time(layout, name, position) is None):
            raise ConfigError(f"flow '{move.flow}' would read '{name}' again from version {position}, which "
                              f"the log of '{name}' no longer holds", location="rewind",
                              hint="rewind to a later version, or full-refresh the table")


def _check_restorable(layout: StorageLayout, path: str, version: int) -> None:
    """Refuse a version whose data files were vacuumed (RESTORE would fail half-way through)."""
    missing = [uri for uri in layout.open_table(path, version).file_uris() if not layout.fs.exists(uri)]
    if missing:
        raise ConfigError(f"version {version} of {path} cannot be restored: {len(missing)} of its files "
                          f"were vacuumed (e.g. {missing[0]})", location="rewind",
                          hint="rewind to a later version")


def _restore(spark: SparkSession, path: str, version: int) -> None:
    spark.sql(f"RESTORE TABLE delta.`{path}` TO VERSION AS OF {version}")
