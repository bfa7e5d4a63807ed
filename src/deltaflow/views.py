"""How the read verbs show their answers: rich tables for people, JSON for scripts.

Example:
    >>> console.print(status_table(pipeline.status()))  # doctest: +SKIP

"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table

if TYPE_CHECKING:
    from deltaflow.commands.history import TableVersion
    from deltaflow.commands.quarantine import QuarantineReport
    from deltaflow.commands.status import FlowStatus


def age(seconds: float | None) -> str:
    """``seconds`` ago, in the largest unit that fits.

    Example:
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
    versions, offsets = flow.delta_versions_behind, flow.kafka_offsets_behind
    parts = ([f"{offsets:,} Kafka offsets"] if offsets is not None else []) + (
        [f"{versions:,} Delta versions"] if versions is not None else [])
    if not parts:
        return "-"
    return ", ".join(parts) + (" (now)" if flow.backlog_measured == "now" else " (at last batch)")


def status_table(flows: list[FlowStatus]) -> Table:
    """One row per flow: state, last batch and its age, rates and their window, backlog, what needs a look."""
    view = Table("flow", "state", "last batch", "rows", "rows/s in", "rows/s processed", "over", "backlog",
                 "note", title_justify="left")
    for flow in flows:
        rates = [f"{r:,.0f}" if r is not None else "-"
                 for r in (flow.input_rows_per_second, flow.processed_rows_per_second)]
        window = f"{flow.rate_window_seconds:,.0f} s" if flow.rate_window_seconds is not None else "-"
        quality = ", ".join(f"{n:,} {what}" for n, what in ((flow.quarantined_rows, "quarantined"),
                                                              (flow.dropped_rows, "dropped")) if n)
        behind = "falling behind: busy all the time with a backlog" if flow.falling_behind else ""
        note = "; ".join(p for p in (behind, quality, flow.error or "", *flow.warnings) if p)
        batch = "-" if flow.last_batch is None else f"{flow.last_batch} ({age(flow.age_seconds)})"
        view.add_row(flow.flow, flow.state, batch, f"{flow.rows_total:,}", *rates, window, _backlog(flow),
                     note)
    return view


def source_position(row: dict[str, object]) -> str:
    """Where a quarantined row came from: ``topic/partition@offset``, or its file."""
    if row.get("topic") is not None:
        return f"{row['topic']}/{row['partition']}@{row['offset']}"
    return str(row.get("source_file") or "-")


def record_text(row: dict[str, object]) -> str:
    """A quarantined row's record as text; a null record says so rather than printing nothing."""
    return "(none: the record was null)" if row.get("record") is None else str(row["record"])


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
    view = Table(title=f"{table}: {len(versions)} version(s), newest first", title_justify="left")
    for header in ("version", "time (UTC)", "operation", "rows", "files", "written by"):
        view.add_column(header, no_wrap=header != "operation")

    def rows(v: TableVersion) -> str:
        counts = zip("+~-", (v.rows_inserted, v.rows_updated, v.rows_deleted), strict=True)
        return " ".join(f"{sign}{n:,}" for sign, n in counts if n) or "-"

    for v in versions:
        writer = f"{v.flow} #{v.batch_id}" if v.flow is not None else v.writer or "-"
        view.add_row(str(v.version), v.timestamp.strftime("%Y-%m-%d %H:%M:%S"), v.operation, rows(v),
                     f"+{v.files_added} -{v.files_removed}", writer)
    return view
