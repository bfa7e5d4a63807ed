"""What a running pipeline shows: one line per micro-batch, or one live line on a terminal.

Examples:
    >>> format_batch(BatchProgress("bronze_clicks", 3, 2000, 1530.0, 4100.0, 490))
    'bronze_clicks  batch 3  read 2,000 rows  in 1,530/s  processed 4,100/s  490 ms'
    >>> format_batch(BatchProgress("silver", 0, 6, 0.5, 1.0, 5956, written=4, quarantined=1, duplicates=1))
    'silver  batch 0  read 6 rows  wrote 4  quarantined 1  1 duplicate dropped  5,956 ms'

"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from deltaflow.cli.shared import console as terminal_console
from deltaflow.runtime.outcomes import BatchProgress, FlowOutcome

#: A batch of fewer rows shows no rates: over a few rows they say more about Spark's start than the flow.
RATE_FROM_ROWS = 1_000


def plural(count: int, word: str) -> str:
    """``count`` and ``word`` in the right number.

    Examples:
        >>> plural(1, "row"), plural(2_000, "row")
        ('1 row', '2,000 rows')

    """
    return f"{count:,} {word if count == 1 else word + 's'}"


def times(count: int) -> str:
    """How often, in words: ``once``, ``3 times``."""
    return "once" if count == 1 else f"{count:,} times"


def set_aside(quarantined: int, dropped: int, duplicates: int) -> list[str]:
    """The rows a flow read and did not write, in words (none: an empty list)."""
    parts = [f"{what} {n:,}" for what, n in (("quarantined", quarantined), ("dropped by rules", dropped))
             if n]
    return parts + ([f"{plural(duplicates, 'duplicate')} dropped"] if duplicates else [])


def format_batch(batch: BatchProgress) -> str:
    """One batch as a line of text: what it read, wrote, set aside; rates for batches of some size."""
    if batch.refresh is not None:
        which = "at start" if batch.batch_id is None else f"batch {batch.batch_id}"
        return (f"{batch.flow}  {which}  read {plural(batch.input_rows, 'new row')}  "
                f"refreshed ({batch.refresh['mode']}): {written(batch.refresh)}  {batch.duration_ms:,} ms")
    parts = [f"{batch.flow}  batch {batch.batch_id}  read {plural(batch.input_rows, 'row')}"]
    if batch.written is not None:
        parts.append(f"wrote {batch.written:,}")
    parts += set_aside(batch.quarantined, batch.dropped, batch.duplicates)
    if batch.input_rows >= RATE_FROM_ROWS:
        parts.append(f"in {batch.input_rows_per_second:,.0f}/s  "
                     f"processed {batch.processed_rows_per_second:,.0f}/s")
    return "  ".join([*parts, f"{batch.duration_ms:,} ms"])


def format_outcome(outcome: FlowOutcome, totals: FlowTotals | None) -> str:
    """How a flow ended, as the run's last lines say it: its state and what it did, or why it did nothing.

    Examples:
        >>> format_outcome(FlowOutcome("gold", "defs.py:20", "skipped", "upstream 'silver' failed"), None)
        "gold: skipped: upstream 'silver' failed"

    """
    if outcome.state == "skipped":
        return f"{outcome.flow}: skipped: {outcome.error}"
    return f"{outcome.flow}: {outcome.state}, {totals.summary() if totals else 'read 0 rows this run'}"


def written(refresh: dict[str, Any]) -> str:
    """What a view's refresh wrote, in words."""
    rows = refresh.get("rows_written")
    return "rows written unknown" if rows is None else f"{plural(rows, 'row')} written"


@dataclass
class FlowTotals:
    """Running totals of one flow, for the live line."""

    batches: int = 0
    rows: int = 0  # read
    last: BatchProgress | None = None
    refreshes: int = 0  # a materialized view's
    written: int = 0  # rows its refreshes wrote, or (counted) the flow's batches
    counted: bool = False  # every batch said what it wrote
    quarantined: int = 0
    dropped: int = 0
    duplicates: int = 0

    def add(self, batch: BatchProgress) -> None:
        """Count ``batch`` in."""
        self.counted = (self.counted or not self.batches) and batch.written is not None
        self.batches += 1
        self.rows += batch.input_rows
        self.last = batch
        if batch.refresh is not None:
            self.refreshes += 1
            self.written += batch.refresh.get("rows_written") or 0
        self.written += batch.written or 0
        self.quarantined += batch.quarantined
        self.dropped += batch.dropped
        self.duplicates += batch.duplicates

    def summary(self) -> str:
        """What the flow did in the run: the rows it read and wrote, or a view's refreshes.

        Examples:
            >>> FlowTotals(rows=6, written=4, counted=True, quarantined=1, duplicates=1).summary()
            'read 6 rows, wrote 4, quarantined 1, 1 duplicate dropped this run'

        """
        if self.refreshes:
            return f"refreshed {times(self.refreshes)} this run, {plural(self.written, 'row')} written"
        parts = [f"read {plural(self.rows, 'row')}"] + ([f"wrote {self.written:,}"] if self.counted else [])
        parts += set_aside(self.quarantined, self.dropped, self.duplicates)
        return ", ".join(parts) + " this run"


@dataclass
class ProgressPrinter:
    """Prints batches as they commit: a line each, or (``live``) one status line updated in place."""

    console: Console = field(default_factory=lambda: terminal_console(stderr=True))
    live: bool = False
    quiet: bool = False
    started: float = field(default_factory=time.monotonic)
    totals: dict[str, FlowTotals] = field(default_factory=dict)

    def __call__(self, batch: BatchProgress) -> None:
        """Record ``batch`` and show it."""
        self.totals.setdefault(batch.flow, FlowTotals()).add(batch)
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
