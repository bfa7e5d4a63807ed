"""Automatic table upkeep during a run: the spec's ``maintenance:`` block, carried out beside the flows.

The run tells the :class:`Maintainer` about every micro-batch it commits; the maintainer compacts a table
once ``optimize_every`` batches have been written to it since its last compaction (counted from the
table's Delta log at the start, so a pipeline run every few minutes reaches the count too), compacts every
table written to each ``optimize_interval``, and runs the stream-aware VACUUM each ``vacuum_every``, with the
log cleanup of :mod:`deltaflow.commands.log_cleanup` after it (Delta's own keeps up to a day more). One
job runs at a time, on its own thread, in the run's SparkSession; the flows keep writing meanwhile (a commit
that loses to the compaction is retried, see :mod:`deltaflow.sinks.conflicts`). A job that fails is
reported and the run goes on: upkeep never stops the data.

Examples:
    >>> maintainer = Maintainer(resolver, print)  # doctest: +SKIP
    >>> maintainer.written("bronze")  # doctest: +SKIP
    >>> maintainer.tick()  # starts a compaction of bronze once it is due  # doctest: +SKIP

"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from deltaflow.define.graph import suggest
from deltaflow.errors import ConfigError, first_line
from deltaflow.spec.durations import human, parse_duration

if TYPE_CHECKING:
    from deltaflow.resolve.resolver import Resolver

JOB_GROUP = "deltaflow-maintenance"
_WRITES = {"WRITE", "STREAMING UPDATE", "MERGE", "UPDATE", "DELETE", "CREATE OR REPLACE TABLE AS SELECT"}


class Maintainer:
    """Carries out the spec's ``maintenance:`` block for the tables of one run.

    Args:
        resolver: The run's resolved pipeline.
        on_message: Told what each job did (or why it did nothing).
        clock: Seconds, monotonic (tests may pass their own).

    """

    def __init__(self, resolver: Resolver, on_message: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.resolver = resolver
        self.settings = resolver.context.spec.maintenance
        self.on_message = on_message
        self.clock = clock
        self.pending: Counter[str] = Counter()  # batches written to each table since its last compaction
        self._every = self.settings.optimize_every
        self._optimize_seconds = _seconds(self.settings.optimize_interval)
        self._vacuum_seconds = _seconds(self.settings.vacuum_every)
        self._last_optimize = self._last_vacuum = clock()
        self._counted = False
        self._job: threading.Thread | None = None
        known = resolver.graph.datasets
        for table in self.settings.zorder:
            if table not in known:
                raise ConfigError(f"maintenance.zorder: no table '{table}'{suggest(table, known)}",
                                  location=str(resolver.context.spec.path or "deltaflow.yml"))

    @property
    def enabled(self) -> bool:
        """Whether the spec asks for any upkeep."""
        return bool(self._every or self._optimize_seconds or self._vacuum_seconds)

    def tables(self) -> list[str]:
        """The tables the run writes (stored datasets), upstream first."""
        return [d for d in self.resolver.order() if self.resolver.graph.datasets[d].stored]

    def written(self, table: str) -> None:
        """One micro-batch was committed to ``table``."""
        self.pending[table] += 1

    def tick(self) -> None:
        """Start the next job that is due, unless one is running; called from the run's watch loop."""
        if not self.enabled or (self._job is not None and self._job.is_alive()):
            return
        if not self._counted:
            self._count_from_logs()
        job = self._due()
        if job is not None:
            self._job = threading.Thread(target=self._run, args=job, name=JOB_GROUP, daemon=True)
            self._job.start()

    def close(self, cancel: bool) -> None:
        """End upkeep with the run: cancel the running job (``cancel``), or let it and any job due finish."""
        if self._job is not None and self._job.is_alive() and cancel:
            self.resolver.context.spark.sparkContext.cancelJobGroup(JOB_GROUP)
        if self._job is not None:
            self._job.join()
        if not cancel and self.enabled:
            while (job := self._due()) is not None:
                self._run(*job)

    def _due(self) -> tuple[str, str] | None:
        now = self.clock()
        for table in self.tables():
            if self._every and self.pending[table] >= self._every:
                return "optimize", table
        if self._optimize_seconds and now - self._last_optimize >= self._optimize_seconds:
            written = [t for t in self.tables() if self.pending[t]]
            if written:
                return "optimize", written[0]
            self._last_optimize = now
        if self._vacuum_seconds and now - self._last_vacuum >= self._vacuum_seconds:
            self._last_vacuum = now
            return "vacuum", ""
        return None

    def _run(self, job: str, table: str) -> None:
        from deltaflow.commands.optimize import optimize_table

        context = self.resolver.context
        context.spark.sparkContext.setJobGroup(JOB_GROUP, f"deltaflow {job} {table}", interruptOnCancel=True)
        try:
            if job == "optimize":
                self.pending[table] = 0
                if not self.pending.total():
                    self._last_optimize = self.clock()
                done = optimize_table(context, table, self.settings.zorder.get(table, ()))
                if done.files_removed:
                    self._say(f"compacted '{table}': {done.files_removed} files into {done.files_added}")
                return
            for name in self.tables():
                self._vacuum(name)
        except Exception as exc:  # upkeep never stops the data; the next due job tries again
            self._say(f"{job} {table or 'of the tables'} failed: {first_line(exc)}")
        finally:
            context.spark.sparkContext._jsc.clearJobGroup()

    def _vacuum(self, table: str) -> None:
        """VACUUM ``table``, then trim its log, each as far as the flows reading it allow."""
        from deltaflow.commands.log_cleanup import clean_log
        from deltaflow.commands.vacuum import vacuum_table

        try:
            result = vacuum_table(self.resolver, table)
            self._say(f"vacuumed '{table}': {result.files} files, removed over {human(result.retention)} ago")
        except ConfigError as exc:
            self._say(f"vacuum of '{table}' skipped: {exc.message}")
        try:
            trimmed = clean_log(self.resolver, table)
        except ConfigError as exc:
            self._say(f"log cleanup of '{table}' skipped: {exc.message}")
            return
        if trimmed.retention is None:
            self._say(f"the log of '{table}' is kept whole: flow '{trimmed.held_by}' reads it from its first "
                      "entry until its next batch")
        elif trimmed.files:
            held = f" (flow '{trimmed.held_by}' reads from there)" if trimmed.held_by else ""
            self._say(f"trimmed the log of '{table}': {trimmed.files} files, over {human(trimmed.retention)} "
                      f"old{held}")

    def _say(self, text: str) -> None:
        self.on_message(f"maintenance: {text}")

    def _count_from_logs(self) -> None:
        """Batches each table got since its last compaction, from its log (at most ``optimize_every``)."""
        from deltaflow.commands.tables import open_table

        self._counted = True
        if not self._every:
            return
        for table in self.tables():
            try:
                history = open_table(self.resolver.context.layout, table).history(self._every)
            except ConfigError:
                continue
            for commit in history:
                if commit.get("operation") == "OPTIMIZE":
                    break
                self.pending[table] += commit.get("operation") in _WRITES


def _seconds(text: str | None) -> float:
    return parse_duration(text).total_seconds() if text else 0.0
