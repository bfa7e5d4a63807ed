"""What the dashboard shows of each table, read with ``deltalake``: version, rows, files, last maintenance.

Reading a table's file list and history costs milliseconds each, so :class:`TableFacts` keeps the answer
per table version and looks for a new version at most every :data:`REFRESH_SECONDS`; quarantine reports
are kept the same way.

Examples:
    >>> facts = TableFacts(layout)  # doctest: +SKIP
    >>> facts.table("bronze_clicks")  # doctest: +SKIP
    {'table': 'bronze_clicks', 'version': 41, 'files': 42, 'rows': 120345, 'last_optimize': None, ...}

"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deltaflow.storage import StorageLayout

#: Seconds between two looks for a table's new version.
REFRESH_SECONDS = 3.0
#: Commits of a table's history searched for its last OPTIMIZE and VACUUM.
HISTORY_DEPTH = 200
#: Quarantined rows shown per table.
SAMPLES = 5


def _iso(millis: Any) -> str | None:
    return datetime.fromtimestamp(int(millis) / 1000, UTC).isoformat() if millis is not None else None


class TableFacts:
    """Per-table facts for one reader, each read again only when its table has a new version."""

    def __init__(self, layout: StorageLayout) -> None:
        self.layout = layout
        self._tables: dict[str, tuple[float, int, dict[str, Any]]] = {}  # name -> (looked at, version, facts)
        self._quarantines: dict[str, tuple[float, int, dict[str, Any] | None]] = {}

    def table(self, name: str) -> dict[str, Any] | None:
        """Version, files, rows and the times of its last OPTIMIZE and VACUUM (None: no table yet)."""
        cached = self._tables.get(name)
        if cached is not None and time.monotonic() - cached[0] < REFRESH_SECONDS:
            return cached[2]
        try:
            delta = self.layout.open_table(self.layout.table(name))
        except Exception:  # not created yet, or being replaced
            return cached[2] if cached else None
        version = delta.version()
        if cached is not None and cached[1] == version:
            self._tables[name] = (time.monotonic(), version, cached[2])
            return cached[2]
        actions = delta.get_add_actions(flatten=True)
        records = list(actions.column("num_records").to_pylist()) if "num_records" in actions.column_names \
            else []
        history = delta.history(HISTORY_DEPTH)

        def last(*operations: str) -> str | None:
            return next((_iso(h.get("timestamp")) for h in history if h.get("operation") in operations), None)

        facts = {"table": name, "version": version, "files": actions.num_rows,
                 "rows": sum(n for n in records if n is not None) if records else None,
                 "last_optimize": last("OPTIMIZE"), "last_vacuum": last("VACUUM END", "VACUUM START")}
        self._tables[name] = (time.monotonic(), version, facts)
        return facts

    def quarantine(self, table: str) -> dict[str, Any] | None:
        """Rows of ``table``'s quarantine by reason, and the newest samples with their source position."""
        from deltaflow.commands.quarantine import quarantine_report, record_text, source_position

        cached = self._quarantines.get(table)
        if cached is not None and time.monotonic() - cached[0] < REFRESH_SECONDS:
            return cached[2]
        try:
            version = self.layout.open_table(self.layout.quarantine(table)).version()
        except Exception:  # the table has no quarantine (yet)
            return None
        if cached is not None and cached[1] == version:
            self._quarantines[table] = (time.monotonic(), version, cached[2])
            return cached[2]
        report = quarantine_report(self.layout, table, samples=SAMPLES)
        samples = sorted((row for rows in report.samples.values() for row in rows),
                         key=lambda r: r["quarantined_at"], reverse=True)[:SAMPLES]
        found = {"rows": report.rows, "reasons": report.reasons, "samples": [
            {"reason": ", ".join(r["failed_expectations"] or ["(none)"]), "source": source_position(r),
             "batch_id": r["batch_id"], "record": record_text(r)} for r in samples]}
        self._quarantines[table] = (time.monotonic(), version, found)
        return found
