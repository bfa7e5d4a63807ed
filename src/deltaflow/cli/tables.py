"""The table verbs of ``deltaflow``: a table's rows, changes and history; compact, vacuum or rewind it.

Each is a thin function over :class:`deltaflow.pipeline.Pipeline`; ``deltaflow.cli.main`` registers them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from deltaflow.cli.progress import plural
from deltaflow.cli.shared import JsonOption, SpecOption, err, load, out, say
from deltaflow.runtime.run_log import run_log

if TYPE_CHECKING:
    from deltaflow.commands.query import QueryResult

RowsJsonOption = Annotated[bool, typer.Option("--json", help="One JSON object per row.")]
CsvOption = Annotated[bool, typer.Option("--csv", help="CSV with a header line.")]


def changes(
    table: Annotated[str, typer.Argument(help="A table of the pipeline.")],
    start: Annotated[int, typer.Option("--from", help="First version to show.", min=0)] = 0,
    end: Annotated[int | None, typer.Option("--to", help="Last version to show (default: latest).", min=0)]
    = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    limit: Annotated[int, typer.Option(help="At most this many rows in the table view (0: all).", min=0)]
    = 50,
    spec: SpecOption = None,
) -> None:
    """Show a table's Change Data Feed: every inserted, updated and deleted row between two versions."""
    from deltaflow.cli.views import changes_table
    from deltaflow.commands.changes import json_line

    notes: list[str] = []  # the feed began after start: read from there
    rows = load(spec, reading=True).changes(table, start, end, on_message=notes.append)
    for note in notes:
        say(note, err)
    if as_json:
        for row in rows:
            say(json_line(row))
        return
    if not rows:
        since = "since its change feed began" if notes else f"from version {start}"
        say(f"{table}: no changes {since} to {'the latest' if end is None else end}")
        return
    out.print(changes_table(table, rows, limit))
    if 0 < limit < len(rows):
        say(f"... {len(rows) - limit:,} more (--limit 0 shows all, --json for JSON lines)")


def show(
    table: Annotated[str, typer.Argument(help="A table of the pipeline.")],
    limit: Annotated[int, typer.Option(help="At most this many rows (0: all).", min=0)] = 20,
    where: Annotated[str | None, typer.Option(help="Only the rows matching this SQL predicate, e.g. "
                                              "\"amount > 10\".")] = None,
    version: Annotated[int | None, typer.Option(help="The table as it was at this version (see 'deltaflow "
                                                "history').", min=0)] = None,
    as_json: RowsJsonOption = False,
    as_csv: CsvOption = False,
    spec: SpecOption = None,
) -> None:
    """Show a table's rows, without Spark: the newest version, or an earlier one."""
    _one_format(as_json, as_csv)
    result = load(spec, reading=True).show(table, limit, where, version)
    at = f" at version {version}" if version is not None else ""
    _print(result, as_json, as_csv, f"{table}{at}")


def sql(
    query: Annotated[str, typer.Argument(help="A SELECT over the pipeline's tables by name.")],
    as_json: RowsJsonOption = False,
    as_csv: CsvOption = False,
    spec: SpecOption = None,
) -> None:
    """Answer a SQL query over the pipeline's tables by name, without Spark (delta-rs' engine)."""
    _one_format(as_json, as_csv)
    _print(load(spec, reading=True).sql(query), as_json, as_csv, "result")


def _one_format(as_json: bool, as_csv: bool) -> None:
    if as_json and as_csv:
        raise typer.BadParameter("--json and --csv: give one", param_hint="--csv")


def _print(result: QueryResult, as_json: bool, as_csv: bool, title: str) -> None:
    from deltaflow.cli.views import csv_text, json_lines, rows_table

    if as_json:
        for line in json_lines(result):
            say(line)
    elif as_csv:
        sys.stdout.write(csv_text(result))
    else:
        out.print(rows_table(title, result))
        if result.more:
            say("... more rows (--limit 0 shows all; --json or --csv for scripts)")


def history(
    table: Annotated[str, typer.Argument(help="A table of the pipeline.")],
    limit: Annotated[int, typer.Option(help="The newest this many versions (0: all the log holds).", min=0)]
    = 20,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per version.")] = False,
    spec: SpecOption = None,
) -> None:
    """Show a table's versions, newest first: what each changed, and the flow and batch that wrote it."""
    from deltaflow.cli.views import history_table

    versions = load(spec, reading=True).history(table, limit)
    if as_json:
        for version in versions:
            say(json.dumps(version.as_json()))
        return
    out.print(history_table(table, versions))


def vacuum(
    tables: Annotated[list[str] | None, typer.Argument(help="Tables to vacuum (default: all).")] = None,
    retain: Annotated[str | None, typer.Option(help="Keep files removed this recently, e.g. 7d, 36h "
                                               "(default: each table's delta.deletedFileRetentionDuration).")]
    = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what would go; delete nothing.")] = False,
    stopped: Annotated[bool, typer.Option("--stopped", help="No run is writing these tables now (allows "
                                          "--retain under an hour).")] = False,
    spec: SpecOption = None,
) -> None:
    """Delete files the tables no longer need, never one a flow streaming them (even stopped) still reads."""
    from deltaflow.commands.arguments import duration
    from deltaflow.spec.durations import human

    keep = duration(retain)  # before anything loads
    pipeline = load(spec)
    with run_log(pipeline.layout, pipeline.name):
        results = pipeline.vacuum(tables or None, keep, dry_run=dry_run, stopped=stopped)
    for result in results:
        verb = "would delete" if result.dry_run else "deleted"
        files = plural(result.files, "file")
        say(f"{result.table}: {verb} {files} removed over {human(result.retention)} ago")


def optimize(
    tables: Annotated[list[str] | None, typer.Argument(help="Tables to compact (default: all).")] = None,
    zorder: Annotated[str | None, typer.Option(help="Cluster the files by these columns, e.g. sensor_id,ts "
                                               "(default: the spec's maintenance.zorder).")] = None,
    where: Annotated[str | None, typer.Option(help="Only the partitions matching this SQL predicate.")]
    = None,
    spec: SpecOption = None,
) -> None:
    """Compact small files into large ones, safe while the pipeline runs (readers never see new rows)."""
    columns = [c.strip() for c in zorder.split(",") if c.strip()] if zorder is not None else None
    pipeline = load(spec)
    with run_log(pipeline.layout, pipeline.name):
        results = pipeline.optimize(tables or None, zorder=columns, where=where)
    for result in results:
        if not result.files_removed:
            say(f"{result.table}: nothing to compact")
            continue
        order = f", Z-ordered by {', '.join(result.zorder)}" if result.zorder else ""
        say(f"{result.table}: compacted {result.files_removed:,} files into {result.files_added:,}{order}")


def rewind(
    table: Annotated[str, typer.Argument(help="A streaming table of the pipeline.")],
    to_version: Annotated[int | None, typer.Option("--to-version", help="The version to go back to "
                                                   "(see 'deltaflow history').", min=0)] = None,
    to_timestamp: Annotated[str | None, typer.Option("--to-timestamp", help="Or the time to go back to, "
                                                     "ISO 8601 (UTC unless it has an offset).")] = None,
    as_json: JsonOption = False,
    spec: SpecOption = None,
) -> None:
    """Put a table back to an earlier version, and the flows writing it back to where they were then.

    The next run reads their input again from there through the current definitions, and rebuilds everything
    downstream. Stop the pipeline first.
    """
    from deltaflow.commands.arguments import check_rewind_target, moment

    at = moment(to_timestamp)
    check_rewind_target(to_version, at)  # before anything loads; the table's checks come before Spark
    pipeline = load(spec)
    with run_log(pipeline.layout, pipeline.name):
        result = pipeline.rewind(table, to_version, at, on_message=lambda m: say(m, err))
    if as_json:
        say(json.dumps(result.as_json()))
        return
    say(f"{table}: rewound to version {result.version} (it was at {result.latest})")
    for move in result.flows:
        where = f"after batch {move.batch}" if move.batch >= 0 else "from the start"
        say(f"  flow '{move.flow}' goes back to {where}; the next run reads its input again from there")
    if result.rebuilt:
        say(f"  the next run rebuilds {', '.join(result.rebuilt)} (downstream)")


TABLE_VERBS: list[Callable[..., None]] = [show, sql, changes, history, optimize, rewind, vacuum]
