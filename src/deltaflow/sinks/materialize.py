"""Materialized views: recompute, then replace in one atomic, idempotent Delta commit.

A view is refreshed by a small streaming query over the pipeline tables it reads (its *driver*): every
micro-batch of new rows upstream triggers a refresh, so the view is fresh within one trigger. The refresh
is built on the micro-batch's own session and written as a Delta overwrite inside
:func:`~deltaflow.sinks.idempotent.idempotent_writes` (the flow's checkpoint identity and the batch id): a
batch replayed after a crash is skipped by Delta instead of written twice. The driver's first batch
recomputes the whole view, so the driver starts at each input's newest version that adds rows
(:func:`newest_data_version`), not at the input's whole snapshot; when a commit from there on replaced or
removed rows (a full refresh or rewind upstream), that batch reads them with ``ignoreChanges``.

With :func:`deltaflow.by_window`, only the windows the new rows fall in are recomputed, from every row of
the inputs in those windows (so late rows and distinct counts stay exact), and replaced with
``replaceWhere``; a batch touching more than :data:`MAX_WINDOWS` windows recomputes everything, and so does
every batch while the view's inputs are small (:data:`FULL_BELOW_BYTES`). A view by window whose query is
one decomposable aggregation over one append-only table is not recomputed at all: its aggregates live in
Spark's state store and each batch writes the groups' new totals (:mod:`deltaflow.sinks.incremental`).

Examples:
    >>> checkpoint = layout.checkpoint("gold_hourly", "gold_hourly")  # doctest: +SKIP
    >>> view = MaterializedView(resolver, "gold_hourly", checkpoint)  # doctest: +SKIP
    >>> query = view.start(Trigger("continuous"))

"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from deltaflow.commands.history import log_history
from deltaflow.errors import SinkError
from deltaflow.faults import crash_point
from deltaflow.runtime.checkpoints import unfinished_batch
from deltaflow.runtime.jvm_sockets import no_delay
from deltaflow.sinks.conflicts import retry_conflicts
from deltaflow.sinks.idempotent import flow_app_id, idempotent_writes
from deltaflow.sinks.incremental import IncrementalRefresh
from deltaflow.sinks.incremental_plan import plan_view
from deltaflow.sinks.late_rows import added_files, removed_rows

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.types import StructType

    from deltaflow.resolve.resolver import Resolver
    from deltaflow.runtime.triggers import Trigger
    from deltaflow.storage import FlowCheckpoint, StorageLayout

MAX_WINDOWS = 64
#: Inputs this small are recomputed whole: scanning them costs less than finding the touched windows and
#: replacing their rows (replaceWhere on a data column reads the view's files for the rows it keeps). On
#: the orders example (1.3 MB of silver) a by-window batch took 3.3 s, a whole recompute 2.2 s. A view
#: recording a change feed keeps the windows, so its feed holds the changed windows only.
FULL_BELOW_BYTES = 64 * 2**20
#: Delta notes there the version of the session's newest commit.
LAST_COMMIT = "spark.databricks.delta.lastCommitVersionInSession"
_UNLIMITED = 2**31 - 1  # files per trigger: a view's first batch takes its input's snapshot whole
_WINDOW_START, _WINDOW_END, _FULL = "_df_window_start", "_df_window_end", "_df_full"


@dataclass
class MaterializedView:
    """The refresh of one materialized view.

    Args:
        resolver: The resolved pipeline.
        name: The view.
        checkpoint: Where its driver query keeps its checkpoint.

    """

    resolver: Resolver
    name: str
    checkpoint: FlowCheckpoint

    def __post_init__(self) -> None:
        self.dataset = self.resolver.graph.datasets[self.name]
        self.flow = self.resolver.graph.flows[self.name]
        self.layout = self.resolver.context.layout
        self.path = self.layout.table(self.name)
        self.refreshed: dict[int, dict[str, Any]] = {}  # batch id -> its refresh, till the event log takes it
        self.standalone: dict[str, Any] | None = None  # the refresh at start of a view without inputs
        self._app_id: str | None = None
        # whether a batch replaces the whole view: None not known yet, True while what that reads is small,
        # False once it is not (tables only grow) or when the view records a change feed
        self._small: bool | None = False if self.resolver.records_changes(self.name) else None
        self.plan = plan_view(self.resolver, self.name)
        self.incremental = None if isinstance(self.plan, str) else IncrementalRefresh(self, self.plan)
        self._schema: StructType | None = None  # the view table's, read when an incremental driver starts
        self._replay: int | None = None  # the batch an incremental driver runs again first, if any

    @property
    def inputs(self) -> list[str]:
        """The stored pipeline datasets the view reads."""
        return list(self.resolver.stored_inputs(self.name))

    def refresh_all(self, batch_id: int | None = None, spark: SparkSession | None = None) -> None:
        """Recompute the whole view and replace its rows (on ``spark``, default the pipeline's session)."""
        self.write(self.resolver.rebuild(self.flow, spark=spark), batch_id)

    def start(self, trigger: Trigger) -> StreamingQuery | None:
        """Start the driver query; without pipeline inputs, refresh once now and return None.

        That refresh is in :attr:`standalone` (mode, rows written, its start and end) for the event log.
        """
        if not self.inputs:
            began = datetime.now(UTC)
            self.refresh_all()
            latest = self.layout.open_table(self.path).version()  # the view's only writer is this flow
            commit = log_history(self.layout, self.path, latest, {}, limit=1)
            self.standalone = {"mode": "full", "rows_written": commit[0].rows_inserted if commit else None,
                               "began": began, "ended": datetime.now(UTC)}
            return None
        writer = (self._driver().writeStream.queryName(self.name).foreachBatch(self._each_batch)
                  .option("checkpointLocation", self.checkpoint.path))
        if self.incremental is not None:
            writer = writer.outputMode(self.incremental.output_mode)
        return trigger.apply(writer).start()

    def _driver(self) -> DataFrame:
        from pyspark.sql import functions as F

        spark = self.resolver.context.spark
        if self.incremental is not None:  # every new row of its one input; the first batch all of them
            stored = spark.read.format("delta").load(self.path)
            self._schema = stored.schema
            self._replay = unfinished_batch(self.layout.fs, self.checkpoint)
            self.incremental.choose_mode(table_bytes(self.layout, self.path))
            table = self.layout.table(self.incremental.plan.input)
            return self.incremental.rows(
                spark.readStream.format("delta").option("maxFilesPerTrigger", _UNLIMITED).load(table))
        refresh = self.dataset.refresh
        first = not any(n.isdigit() for n in self.layout.fs.list(self.checkpoint.commits))
        parts = []
        for name in self.inputs:
            reader = spark.readStream.format("delta")
            # Not the snapshot (see the module docstring): Delta lists it in a Spark job for batch 0, and
            # again at each restart while batch 0 is the last (Spark asks the source for it once more).
            newest = newest_data_version(self.layout, name)
            if self.resolver.rewrites(name):
                reader = reader.option("ignoreChanges", "true")  # a rewrite is new data for us
            elif first and newest is not None and removes_rows_from(self.layout, name, newest):
                # A full refresh or rewind upstream replaced the rows: batch 0 recomputes the whole view
                # whatever it reads, so it may read that commit, and reads all to the end (no later batch
                # of this checkpoint, which reads without the option, meets it).
                reader = reader.option("ignoreChanges", "true").option("maxFilesPerTrigger", _UNLIMITED)
            if newest is not None:
                reader = reader.option("startingVersion", str(newest))
            df = reader.load(self.layout.table(name))
            if refresh is not None and refresh.column in df.columns:
                window = F.window(refresh.column, refresh.duration)
                df = df.select(F.unix_micros(window.start).alias(_WINDOW_START),
                               F.unix_micros(window.end).alias(_WINDOW_END), F.lit(False).alias(_FULL))
            else:
                df = df.select(F.lit(None).cast("long").alias(_WINDOW_START),
                               F.lit(None).cast("long").alias(_WINDOW_END), F.lit(True).alias(_FULL))
            parts.append(df)
        driver = parts[0]
        for part in parts[1:]:
            driver = driver.unionByName(part)
        return driver

    def _each_batch(self, batch: DataFrame, batch_id: int) -> None:
        no_delay()
        self._on_batch(batch, batch_id)
        crash_point(f"after_commit:{self.name}")

    def _on_batch(self, batch: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        from deltaflow.sinks.new_rows import adds_rows

        if self.incremental is not None:
            assert self._schema is not None  # read by _driver
            self.incremental.apply(batch, batch_id, self._schema, replayed=batch_id == self._replay)
            return
        refresh = self.dataset.refresh
        session = batch.sparkSession
        if refresh is None or batch_id == 0:  # batch 0 of a checkpoint: not every input row (see _driver)
            appends = batch_id > 0 and not any(map(self.resolver.rewrites, self.inputs))
            if appends and not adds_rows(self.layout, self.checkpoint, self.inputs, batch_id):
                return  # append-only inputs, no new row: a property change or a compaction upstream
            self.refresh_all(batch_id, session)
            return
        if self._small is not False:
            if batch.isEmpty():
                return
            whole = self.resolver.rebuild(self.flow, spark=session)
            if self.whole_is_cheaper(whole, FULL_BELOW_BYTES):
                self.write(whole, batch_id)
                return
        touched = batch.groupBy(_WINDOW_START, _WINDOW_END).agg(F.max(_FULL).alias(_FULL)).collect()
        if not touched:
            return
        if any(row[_FULL] for row in touched) or len(touched) > MAX_WINDOWS:
            self.refresh_all(batch_id, session)
            return
        windows = sorted((int(row[_WINDOW_START]), int(row[_WINDOW_END])) for row in touched)
        self.recompute_windows(windows, batch_id, session)

    def recompute_windows(self, windows: list[tuple[int, int]], batch_id: int, session: SparkSession,
                          late: bool = False) -> None:
        """Recompute the view's rows in ``windows`` (start, end in microseconds) and replace them.

        ``late``: the windows of an incremental view's late rows, after the batch's own write (so the
        write carries a transaction id of its own: Delta would skip a second one under the batch's).
        """
        refresh = self.dataset.refresh
        assert refresh is not None
        restrict = {name: _in_windows(refresh.column, windows) for name in self.inputs
                    if refresh.column in self.resolver.schemas[name].names}
        self.write(self.resolver.rebuild(self.flow, restrict, session), batch_id,
                   replace_where=window_predicate(refresh.output, [start for start, _ in windows]),
                   app_id=f"{self.app_id()}:late" if late else None)

    def whole_is_cheaper(self, df: DataFrame, limit: int) -> bool:
        """Whether a batch should replace every row of the view rather than some windows' rows.

        So while ``df`` reads at most ``limit`` bytes, unless the view records a change feed (which then
        holds the changed windows only). Once larger, it stays so for the run: tables only grow.

        Args:
            df: What a whole replacement reads: the view's query over its inputs.
            limit: Up to how many bytes of it the whole replacement is the cheaper one.

        """
        if self._small is not False:
            self._small = input_bytes(df) <= limit
        return self._small

    def write(self, df: DataFrame, batch_id: int | None, replace_where: str | None = None,
              mode: str | None = None, app_id: str | None = None) -> None:
        """Replace the view's rows (those ``replace_where`` selects) with ``df``, once per ``batch_id``.

        ``mode``: how the refresh is reported (default ``windows`` with ``replace_where``, else ``full``).
        ``app_id``: the write's ``txnAppId`` (default the view's, :meth:`app_id`).
        """
        writer = df.write.format("delta").mode("overwrite").partitionBy(*self.dataset.partition_cols)
        if replace_where:
            writer = writer.option("replaceWhere", replace_where)
        else:  # a new schema replaces the old, and so would no partitioning the declared one
            writer = writer.option("overwriteSchema", "true")
        try:
            what = f"materialized view '{self.name}'"
            if batch_id is None:
                retry_conflicts(lambda: writer.save(self.path), what)
            else:
                with idempotent_writes(df.sparkSession, app_id or self.app_id(), batch_id):
                    retry_conflicts(lambda: writer.save(self.path), what)
        except Exception as exc:
            refresh = self.dataset.refresh
            if refresh is not None and replace_where and "does not conform" in str(exc).lower():
                raise SinkError(f"materialized view '{self.name}' wrote rows outside the windows it "
                                f"recomputed; refresh=dp.by_window(...) needs the view grouped by "
                                f"F.window('{refresh.column}', '{refresh.duration}') with its start in "
                                f"'{refresh.output}'", location=str(self.dataset.location)) from exc
            raise
        self.note_refresh(df.sparkSession, batch_id, mode or ("windows" if replace_where else "full"))

    def merge(self, groups: DataFrame, keys: tuple[str, ...], batch_id: int) -> None:
        """MERGE ``groups`` (whole rows of the view) into the view by ``keys``, once per ``batch_id``."""
        from delta.tables import DeltaTable

        session = groups.sparkSession
        same = " AND ".join(f"t.{_q(key)} <=> s.{_q(key)}" for key in keys)  # a null key is a group too

        def merge() -> None:
            (DeltaTable.forPath(session, self.path).alias("t").merge(groups.alias("s"), same)
             .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())

        with idempotent_writes(session, self.app_id(), batch_id):
            retry_conflicts(merge, f"materialized view '{self.name}'")
        self.note_refresh(session, batch_id, "incremental")

    def take_refresh(self, batch_id: int) -> dict[str, Any] | None:
        """What batch ``batch_id`` refreshed (mode, rows written), once: the event log asks for it."""
        return self.refreshed.pop(batch_id, None)

    def note_refresh(self, session: SparkSession, batch_id: int | None, mode: str) -> None:
        """Note batch ``batch_id``'s refresh, with the rows its commit says (read as ``history`` does)."""
        if batch_id is None:
            return
        version = session.conf.get(LAST_COMMIT, None)
        commits = [] if version is None else log_history(self.layout, self.path, int(version), {}, limit=1)
        rows = None
        if commits and (commits[0].flow, commits[0].generation, commits[0].batch_id) == (
                self.flow.name, self.checkpoint.generation, batch_id):  # else Delta skipped it: a replay
            commit = commits[0]
            counts = (commit.rows_inserted, commit.rows_updated, commit.rows_deleted) \
                if commit.operation == "MERGE" else (commit.rows_inserted,)  # a MERGE: the groups changed
            rows = sum(n for n in counts if n is not None)
        if (before := self.refreshed.get(batch_id)) is not None:  # late windows after the batch's write
            mode, rows = before["mode"], None if rows is None else (before["rows_written"] or 0) + rows
        self.refreshed[batch_id] = {"mode": mode, "rows_written": rows}

    def app_id(self) -> str:
        """``txnAppId`` of this view's writes: its checkpoint identity, new whenever the checkpoint is."""
        if self._app_id is None:
            self._app_id = flow_app_id(self.layout, self.checkpoint)
        return self._app_id


def outdated(resolver: Resolver, name: str) -> bool:
    """Whether view ``name``'s checkpoint was built for another way of refreshing it: it needs a full refresh.

    An incremental view's state (its rows and the deduplication state of its distinct counts) was built
    by the batches its checkpoint committed, under the plan written beside them. A different plan now (a
    changed definition), no plan (batches recomputed by window), or a plan where the view is now
    recomputed (its driver query has no such state) means the checkpoint cannot go on.
    """
    if resolver.kinds[name] != "materialized_view" or resolver.graph.datasets[name].refresh is None:
        return False
    layout = resolver.context.layout
    checkpoint = layout.checkpoint(name, name)
    if not any(n.isdigit() for n in layout.fs.list(checkpoint.commits)):
        return False
    plan = plan_view(resolver, name)
    return layout.fs.read_text(checkpoint.view_plan) != (None if isinstance(plan, str) else plan.signature)


def newest_data_version(layout: StorageLayout, dataset: str, look_back: int = 100) -> int | None:
    """The newest version of ``dataset``'s table that adds rows (None: none of the last ``look_back``).

    Read from the table's Delta log (its newest commit files), without a JVM. Commits that add no rows
    (compaction, VACUUM, a property change) are passed over.

    Examples:
        >>> newest_data_version(layout, "silver_clicks")  # doctest: +SKIP
        12

    """
    versions = _log_versions(layout, dataset)
    return next((v for v in versions[:look_back] if added_files(layout, dataset, v)), None)


def removes_rows_from(layout: StorageLayout, dataset: str, version: int) -> bool:
    """Whether a commit of ``dataset``'s table from ``version`` on removes rows: a Delta stream stops there.

    Examples:
        >>> removes_rows_from(layout, "silver_clicks", 12)  # after a full refresh of it  # doctest: +SKIP
        True

    """
    return any(removed_rows(layout, dataset, v) for v in _log_versions(layout, dataset) if v >= version)


def _log_versions(layout: StorageLayout, dataset: str) -> list[int]:
    """The versions of ``dataset``'s table with a commit file in its Delta log, newest first."""
    return sorted((int(name[:-5]) for name in layout.fs.list(layout.delta_log(dataset))
                   if name.endswith(".json") and name[:-5].isdigit()), reverse=True)


def window_predicate(output: str, starts: list[int]) -> str:
    """``replaceWhere`` for the view rows whose ``output`` is one of ``starts`` (microseconds)."""
    return f"{output} IN ({', '.join(f'timestamp_micros({start})' for start in starts)})"


def table_bytes(layout: StorageLayout, path: str) -> int:
    """The bytes of the current files of the Delta table at ``path``, read by ``deltalake`` (no Spark job)."""
    return sum(layout.open_table(path).get_add_actions(flatten=True).column("size_bytes").to_pylist())


def input_bytes(df: DataFrame) -> int:
    """The bytes ``df`` reads: its relations as Spark sizes them (a Delta table's from its snapshot, no job).

    The analyzed plan's relations, not the optimized plan's: optimizing a Delta read also lists the files
    it scans, one Spark job more for the same figure (about 0.15 s a call on a new version).
    """
    leaves = df._jdf.queryExecution().analyzed().collectLeaves()
    return sum(int(leaves.apply(i).stats().sizeInBytes()) for i in range(leaves.size()))


def _in_windows(column: str, windows: list[tuple[int, int]]) -> Column:
    """``column`` falls in one of ``windows`` (start/end in microseconds); adjacent windows are merged."""
    from pyspark.sql import functions as F

    merged: list[list[int]] = []
    for start, end in windows:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    condition: Column | None = None
    for start, end in merged:
        part = ((F.col(column) >= F.timestamp_micros(F.lit(start)))
                & (F.col(column) < F.timestamp_micros(F.lit(end))))
        condition = part if condition is None else condition | part
    assert condition is not None
    return condition


def _q(column: str) -> str:
    return f"`{column.replace('`', '``')}`"
