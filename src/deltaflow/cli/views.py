"""How the read verbs show their answers: rich tables for people, JSON for scripts.

Examples:
    >>> console.print(status_table(pipeline.status()))  # doctest: +SKIP

"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rich import box
from rich.markup import escape
from rich.table import Table

from deltaflow.cli.progress import RATE_FROM_ROWS, plural, times
from deltaflow.commands.quarantine import record_text, source_position
from deltaflow.commands.status import NOT_RUN

if TYPE_CHECKING:
    from deltaflow.commands.history import TableVersion
    from deltaflow.commands.quarantine import QuarantineReport
    from deltaflow.commands.query import QueryResult
    from deltaflow.commands.status import FlowStatus


def age(seconds: float | None) -> str:
    """``seconds`` ago, in the largest unit that fits.

    Examples:
        >>> age(7200)
        '2 h ago'

    """
    if seconds is None:
        return "-"
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


def _backlog(flow: FlowStatus) -> str:
    behind = ((flow.kafka_offsets_behind, "offset"), (flow.delta_versions_behind, "version"))
    parts = [f"{n:,} {unit}{'' if n == 1 else 's'}" for n, unit in behind if n]
    if not parts:
        return "-" if all(n is None for n, _ in behind) else "none"
    return ", ".join(parts) + (" now" if flow.backlog_measured == "now" else " at batch")


def status_notes(flow: FlowStatus) -> str:
    """What to know of ``flow``: a view's refreshes, falling behind, rows set aside, its error, warnings."""
    behind = "falling behind: busy all the time with a backlog" if flow.falling_behind else ""
    quality = ", ".join(f"{n:,} {what}" for n, what in ((flow.quarantined_rows, "quarantined"),
                                                          (flow.dropped_rows, "dropped")) if n)
    refreshed = (f"refreshed {times(flow.refreshes)}, {plural(flow.rows_written, 'row')} written, the last "
                 f"{flow.last_refresh_mode}") if flow.refreshes else ""
    return "; ".join(p for p in (refreshed, behind, quality, flow.error or "", *flow.warnings) if p)


def status_table(flows: list[FlowStatus]) -> Table:
    """One row per flow: state, last batch and its age, rows, rates in and out, backlog.

    Fits an 80-column terminal: the flow, its state and its figures are never cut (the last batch and the
    backlog wrap); what needs a look (errors, warnings, rows set aside) is :func:`status_notes`, printed
    below, and the rates' window is the caption.
    """
    def rated(flow: FlowStatus) -> bool:  # enough rows in the window for a rate to mean something
        return (flow.input_rows_per_second or 0) * (flow.rate_window_seconds or 0) >= RATE_FROM_ROWS

    windows = sorted({round(f.rate_window_seconds) for f in flows if f.rate_window_seconds and rated(f)})
    span = "-".join(f"{w:,}" for w in dict.fromkeys(windows[:1] + windows[-1:]))  # "60", or "45-60"
    view = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0), caption_justify="left",
                 caption=f"rows/s over the last {span} s of each flow's batches" if span else None)
    for header in ("flow", "state", "last batch", "rows read", "in/s", "out/s", "backlog"):
        wraps = header in ("last batch", "backlog")
        view.add_column(header, no_wrap=not wraps, overflow="fold" if wraps else "ellipsis",
                        justify="right" if header in ("rows read", "in/s", "out/s") else "left")
    for flow in flows:
        rates = [f"{r:,.0f}" if r is not None and rated(flow) else "-"
                 for r in (flow.input_rows_per_second, flow.processed_rows_per_second)]
        batch = "-" if flow.last_batch is None else f"{flow.last_batch} ({age(flow.age_seconds)})"
        rows = "-" if flow.state == NOT_RUN else f"{flow.rows_total:,}"
        view.add_row(flow.flow, flow.state, batch, rows, *rates, _backlog(flow))
    return view


def quarantine_tables(report: QuarantineReport) -> tuple[Table, Table]:
    """The counts by reason, and the sample rows with their source position."""
    counts = Table("reason", "rows", title=f"{report.table}_quarantine: {report.rows:,} row(s)",
                   title_justify="left")
    for reason, count in report.reasons.items():
        counts.add_row(reason, f"{count:,}")
    samples = Table("reason", "source", "batch", "record", title="samples", title_justify="left")
    for reason, rows in report.samples.items():
        for row in rows:
            samples.add_row(reason, source_position(row), str(row["batch_id"]), record_text(row)[:120])
    return counts, samples


def changes_table(table: str, rows: list[dict[str, Any]], limit: int) -> Table:
    """The first ``limit`` change rows (all when ``limit`` <= 0)."""
    view = Table(*rows[0].keys(), title=f"{table}: {len(rows):,} change(s)", title_justify="left")
    for row in rows if limit <= 0 else rows[:limit]:
        view.add_row(*("" if v is None else str(v) for v in row.values()))
    return view


def history_table(table: str, versions: list[TableVersion]) -> Table:
    """A table's versions, newest first: what each did and which flow and batch (``flow #batch``) wrote it."""
    view = Table(title=f"{table}: {plural(len(versions), 'version')}, newest first", title_justify="left")
    for header in ("version", "time (UTC)", "operation", "rows", "files", "written by"):
        view.add_column(header, no_wrap=header != "operation")

    def rows(v: TableVersion) -> str:
        counts = zip("+~-", (v.rows_inserted, v.rows_updated, v.rows_deleted), strict=True)
        if changed := " ".join(f"{sign}{n:,}" for sign, n in counts if n):
            return changed
        # a batch that brought nothing still commits: its mark is how a replay knows it is done
        return "none (empty batch)" if v.flow is not None and not (v.files_added or v.files_removed) else "-"

    for v in versions:
        writer = f"{v.flow} #{v.batch_id}" if v.flow is not None else v.writer or "-"
        view.add_row(str(v.version), v.timestamp.strftime("%Y-%m-%d %H:%M:%S"), v.operation, rows(v),
                     f"+{v.files_added} -{v.files_removed}", writer)
    return view


def rows_table(title: str, result: QueryResult) -> Table:
    """A query's rows under its column names; a null shows as ``null``, apart from an empty string."""
    count = f"{len(result.rows):,}{'+' if result.more else ''} row{'' if len(result.rows) == 1 else 's'}"
    view = Table(*result.columns, title=f"{title}: {count}", title_justify="left")
    for row in result.rows:
        view.add_row(*("[dim]null[/]" if v is None else escape(cell(v)) for v in row))
    return view


def cell(value: Any) -> str:
    """A value as a table shows it: timestamps in UTC without the offset, structs and arrays spelled out.

    Examples:
        >>> from datetime import UTC, datetime
        >>> cell({"start": datetime(2026, 12, 3, 14, tzinfo=UTC), "n": [1, None]})
        '{start: 2026-12-03 14:00:00, n: [1, null]}'

    """
    if value is None:
        return "null"
    if isinstance(value, datetime):
        moment = value.astimezone(UTC) if value.tzinfo else value
        return moment.replace(tzinfo=None).isoformat(sep=" ")
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {cell(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(cell(v) for v in value) + "]"
    return str(value)


def json_lines(result: QueryResult) -> Iterator[str]:
    """One JSON object per row (timestamps in ISO 8601, decimals as strings)."""
    from deltaflow.commands.changes import json_line

    for row in result.as_dicts():
        yield json_line(row)


def csv_text(result: QueryResult) -> str:
    """The rows as CSV with a header line (a null as an empty field, a struct or an array as JSON)."""
    import csv
    import io

    from deltaflow.commands.changes import json_line

    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(result.columns)
    writer.writerows(["" if v is None else json_line(v) if isinstance(v, dict | list) else v for v in row]
                     for row in result.rows)
    return text.getvalue()
