"""What a running pipeline shows: one line per micro-batch, or one live line on a terminal.

Example:
    >>> line = format_batch(BatchProgress("bronze_clicks", 3, 2000, 1530.0, 4100.0, 490))
    >>> line
    'bronze_clicks  batch 3  +2,000 rows  in 1,530/s  processed 4,100/s  490 ms'

"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from deltaflow.runtime.outcomes import BatchProgress, FlowOutcome


def format_batch(batch: BatchProgress) -> str:
    """One batch as a line of text."""
    if batch.refresh is not None:
        which = "at start" if batch.batch_id is None else f"batch {batch.batch_id}"
        return (f"{batch.flow}  {which}  {batch.input_rows:,} new rows read  "
                f"refreshed ({batch.refresh['mode']}): {written(batch.refresh)}  {batch.duration_ms:,} ms")
    return (f"{batch.flow}  batch {batch.batch_id}  +{batch.input_rows:,} rows  "
            f"in {batch.input_rows_per_second:,.0f}/s  processed {batch.processed_rows_per_second:,.0f}/s  "
            f"{batch.duration_ms:,} ms")


def format_outcome(outcome: FlowOutcome, totals: FlowTotals | None) -> str:
    """How a flow ended, as the run's last lines say it: its state and what it did, or why it did nothing.

    Example:
        >>> format_outcome(FlowOutcome("gold", "defs.py:20", "skipped", "upstream 'silver' failed"), None)
        "gold: skipped: upstream 'silver' failed"

    """
    if outcome.state == "skipped":
        return f"{outcome.flow}: skipped: {outcome.error}"
    return f"{outcome.flow}: {outcome.state}, {totals.summary() if totals else '0 rows this run'}"


def written(refresh: dict[str, Any]) -> str:
    """What a view's refresh wrote, in words."""
    rows = refresh.get("rows_written")
    return "rows written unknown" if rows is None else f"{rows:,} rows written"


@dataclass
class FlowTotals:
    """Running totals of one flow, for the live line."""

    batches: int = 0
    rows: int = 0
    last: BatchProgress | None = None
    refreshes: int = 0  # a materialized view's
    written: int = 0  # rows its refreshes wrote

    def summary(self) -> str:
        """What the flow did in the run: its rows, or a view's refreshes."""
        if not self.refreshes:
            return f"{self.rows:,} rows this run"
        return f"refreshed {self.refreshes:,} time(s) this run, {self.written:,} rows written"


@dataclass
class ProgressPrinter:
    """Prints batches as they commit: a line each, or (``live``) one status line updated in place."""

    console: Console = field(default_factory=lambda: Console(stderr=True, highlight=False))
    live: bool = False
    quiet: bool = False
    started: float = field(default_factory=time.monotonic)
    totals: dict[str, FlowTotals] = field(default_factory=dict)

    def __call__(self, batch: BatchProgress) -> None:
        """Record ``batch`` and show it."""
        totals = self.totals.setdefault(batch.flow, FlowTotals())
        totals.batches += 1
        totals.rows += batch.input_rows
        totals.last = batch
        if batch.refresh is not None:
            totals.refreshes += 1
            totals.written += batch.refresh.get("rows_written") or 0
        if not self.quiet and not self.live:
            self.console.print(format_batch(batch), markup=False)

    def status_line(self, extra: str = "") -> str:
        """All flows on one line: batch, rows so far and the latest rates."""
        parts = []
        for name, t in self.totals.items():
            rates = (f"in {t.last.input_rows_per_second:,.0f}/s processed "
                     f"{t.last.processed_rows_per_second:,.0f}/s") if t.last else ""
            last_batch = t.last.batch_id if t.last and t.last.batch_id is not None else "-"
            parts.append(f"{name}: batch {last_batch}, {t.rows:,} rows, {rates}")
        elapsed = time.monotonic() - self.started
        body = " | ".join(parts) or "waiting for the first batch"
        return f"[{elapsed:5.0f}s] {body}{extra}"
