"""A verb's arguments, checked before Spark starts: one line naming what is wrong, ``deltaflow`` exits 2.

Each check needs at most the definitions (:attr:`Pipeline.graph`, loaded without Spark), the storage's
files read with ``deltalake``, and the graph the last run recorded (``StorageLayout.graph_record``) when
the definitions have not changed since (their fingerprint is the same): that record says what resolution
found, which table each flow streams and whether it quarantines. Where only resolution can tell, the
verb's own check after it still refuses, as before.

Examples:
    >>> check_rewind(pipeline, "silver_events", None, None)  # doctest: +SKIP
    Traceback (most recent call last):
    deltaflow.errors.ArgumentError: DF-USAGE rewind: give the version (--to-version) or the time ...

"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from deltaflow.define.graph import KIND_LABELS, suggest
from deltaflow.errors import ArgumentError, ConfigError

if TYPE_CHECKING:
    from deltaflow.define.graph import Dataset
    from deltaflow.pipeline import Pipeline

def moment(text: str | None, option: str = "--to-timestamp") -> datetime | None:
    """``text`` as a time (see :func:`~deltaflow.spec.durations.parse_moment`), or None when not given."""
    from deltaflow.spec.durations import parse_moment

    return None if text is None else _as_argument(parse_moment, text, option)


def duration(text: str | None, option: str = "--retain") -> timedelta | None:
    """``text`` as a duration (:func:`~deltaflow.spec.durations.parse_duration`), or None when not given."""
    from deltaflow.spec.durations import parse_duration

    return None if text is None else _as_argument(parse_duration, text, option)


def _as_argument(parse: Any, text: str, option: str) -> Any:
    try:
        return parse(text)
    except ConfigError as exc:
        raise ArgumentError(exc.message, location=option, hint=exc.hint) from None


def dataset(pipeline: Pipeline, name: str, verb: str, stored: bool = True) -> Dataset:
    """The dataset ``name`` of the pipeline; refused when unknown (or, with ``stored``, not a table).

    Raises:
        ArgumentError: Naming the verb and the closest known name.

    """
    datasets = pipeline.graph.datasets
    found = datasets.get(name)
    if found is None:
        raise ArgumentError(f"unknown table '{name}'{suggest(name, datasets)}", location=verb,
                            hint="see 'deltaflow graph'")
    if stored and not found.stored:
        raise ArgumentError(f"'{name}' is a {KIND_LABELS[found.kind]}, not a table", location=verb)
    return found


def resolved_record(pipeline: Pipeline) -> dict[str, dict[str, Any]] | None:
    """Each dataset as the last run resolved it (kind, flows, inputs), if the definitions are the same."""
    from deltaflow.observe.graph_record import read_graph_record

    record = read_graph_record(pipeline.layout)
    if record is None or record.get("fingerprint") != pipeline.fingerprint():
        return None
    return {d["dataset"]: d for d in record.get("datasets", [])}


def check_rewind_target(version: int | None, timestamp: datetime | None) -> None:
    """Refuse a rewind given no version or time to go back to, or both, or a negative version.

    Raises:
        ArgumentError: Naming the options.

    """
    if (version is None) == (timestamp is None):
        raise ArgumentError("give --to-version or --to-timestamp, not both" if version is not None else
                            "give the version (--to-version) or the time (--to-timestamp) to rewind to",
                            location="rewind")
    if version is not None and version < 0:
        raise ArgumentError(f"--to-version {version}: versions start at 0", location="rewind")


def check_rewind(pipeline: Pipeline, table: str, version: int | None, timestamp: datetime | None) -> None:
    """Refuse a rewind whose arguments are wrong: no target or two, an unknown table, not a streaming table.

    Then, when no rewind is unfinished, the version asked against the table's log (read without Spark).

    Raises:
        ArgumentError: The arguments are wrong.
        ConfigError: The table cannot go back to that version (see ``commands.rewind``).

    """
    check_rewind_target(version, timestamp)
    found = dataset(pipeline, table, "rewind")
    kind = (resolved_record(pipeline) or {}).get(table, {}).get("kind", found.kind)
    if kind != "table" or found.handler is not None:
        label = KIND_LABELS.get(kind, kind)
        raise ArgumentError(f"'{table}' is a {label}, not a streaming table; only those are rewound",
                            location="rewind",
                            hint="a materialized view is recomputed from what it reads: rewind those tables")
    layout = pipeline.storage()
    if not layout.rewound_tables():  # an unfinished rewind may be the same one, asked again: it finishes it
        from deltaflow.commands.history import table_history
        from deltaflow.commands.rewind import target_version

        target_version(table, table_history(layout, table, limit=0), version, timestamp)


def check_replay(pipeline: Pipeline, table: str) -> None:
    """Refuse a quarantine replay of a table that has no quarantine, or whose rows cannot be found again.

    Raises:
        ArgumentError: An unknown table, one no flow quarantines into, or one whose flow does not stream
            one table of rows with their Kafka position.
        ConfigError: Nothing was quarantined yet.

    """
    from deltaflow.define.expectations import expectations_of

    found = dataset(pipeline, table, "quarantine replay")
    record = resolved_record(pipeline)
    layout = pipeline.storage()
    had_one = layout.fs.is_dir(layout.quarantine(table))
    if record is None:  # what resolution would find is not known: only what the definitions say
        rules = any(r.action == "quarantine" for f in pipeline.graph.flows_into(table)
                    for r in expectations_of(f.func))
        quarantines = found.kind == "table" and (rules or had_one)
    else:
        quarantines = any(f.get("quarantines") for f in record.get(table, {}).get("flows", []))
    if not quarantines:
        raise ArgumentError(f"'{table}' has no flow writing a quarantine", location="quarantine replay",
                            hint="replay works for tables with expect_or_quarantine rules or dp.parse_json")
    if record is not None:
        _check_positions(pipeline, table, record)
    if not had_one:
        raise ConfigError(f"'{table}' has nothing quarantined to replay (no row has failed its rules yet)",
                          location="quarantine replay")


def _check_positions(pipeline: Pipeline, table: str, record: dict[str, dict[str, Any]]) -> None:
    """Refuse, as ``commands.replay`` does after resolution, a flow not streaming rows with positions."""
    from deltaflow.commands.replay import POSITION

    streamed = [name for name, mode in _stored_inputs(record, table).items() if mode == "stream"]
    columns: Iterable[str] = POSITION
    if len(streamed) == 1 and pipeline.layout.fs.is_dir(pipeline.layout.table(streamed[0])):
        from deltaflow.commands.tables import open_table

        columns = open_table(pipeline.layout, streamed[0]).schema().to_arrow().names
    if len(streamed) != 1 or not set(POSITION) <= set(columns):
        raise ArgumentError(f"'{table}' cannot be replayed: its flow must stream one table whose rows carry "
                            "their Kafka position (topic, partition, offset)", location="quarantine replay",
                            hint="read a bronze table of dp.read_kafka, which keeps them")


def _stored_inputs(record: dict[str, dict[str, Any]], name: str) -> dict[str, str]:
    """``ResolvedGraph.stored_inputs`` from the record: what the flows into ``name`` read, views followed."""
    result: dict[str, str] = {}
    for flow in record.get(name, {}).get("flows", []):
        for read, mode in flow.get("inputs", {}).items():
            if record.get(read, {}).get("kind") == "temporary_view":
                result.update(_stored_inputs(record, read))
            else:
                result[read] = mode
    return result


def check_vacuum(pipeline: Pipeline, tables: Sequence[str], retain: timedelta | None, stopped: bool) -> None:
    """Refuse an unknown table, or a retention under an hour without ``stopped``.

    Raises:
        ArgumentError: Naming the table or the retention.

    """
    from deltaflow.commands.vacuum import MIN_RETENTION
    from deltaflow.spec.durations import human

    for name in tables:
        dataset(pipeline, name, "vacuum")
    if retain is not None and retain < MIN_RETENTION and not stopped:
        raise ArgumentError(f"--retain {human(retain)}: files of a batch being written now could go (under "
                            f"{human(MIN_RETENTION)})", location="vacuum",
                            hint="stop the pipeline and pass --stopped, or keep more")


def check_optimize(pipeline: Pipeline, tables: Sequence[str], zorder: Sequence[str] | None) -> None:
    """Refuse an unknown table, or a ``zorder`` column one of the tables does not have.

    Raises:
        ArgumentError: Naming the table and the column.

    """
    from deltaflow.commands.tables import open_table

    for name in tables:
        dataset(pipeline, name, "optimize")
    if not zorder:
        return
    for name in tables or pipeline.tables():
        if pipeline.layout.fs.is_dir(pipeline.layout.table(name)):
            columns = open_table(pipeline.layout, name).schema().to_arrow().names
            for column in zorder:
                if column not in columns:
                    raise ArgumentError(f"optimize '{name}' --zorder: no column '{column}'"
                                        f"{suggest(column, columns)}", hint="columns: " + ", ".join(columns))
