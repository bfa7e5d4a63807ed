"""Resolve a pipeline graph: run each flow's function, learn what it reads, and check the whole.

A flow's inputs are only known once its function runs: ``spark.readStream.table("bronze")``,
``spark.read.table(...)``, ``dp.read_stream(...)`` and ``dp.read(...)`` all land in :meth:`Resolver.read`,
which resolves the dataset read first (depth first, so a cycle is caught where it closes), records the
edge, and returns a DataFrame over the dataset's Delta table. When only analysing (``deltaflow dry-run``)
tables are never created: reads return empty DataFrames of the right schema, and nothing is written.

Examples:
    >>> resolved = Resolver(graph, context, analyze_only=True).resolve()  # doctest: +SKIP
    >>> resolved.flows["silver_clicks"].inputs
    {'bronze_clicks': 'stream'}

"""

from __future__ import annotations

import dataclasses
import sys
import threading
import traceback
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from deltaflow.define.context import PipelineContext, activate, current
from deltaflow.define.graph import KIND_LABELS, Dataset, DatasetKind, Flow, PipelineGraph, suggest
from deltaflow.errors import DeltaflowError, GraphError, first_line
from deltaflow.resolve import reads
from deltaflow.resolve.resolved import ResolvedFlow, ResolvedGraph
from deltaflow.resolve.state import resolving

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType


class Resolver(ResolvedGraph):
    """Resolves datasets and flows; what it learns is a :class:`ResolvedGraph`.

    Args:
        graph: The registered definitions.
        context: The pipeline's session, spec and storage layout.
        analyze_only: Never create tables; read placeholders of the right schema instead.

    """

    def __init__(self, graph: PipelineGraph, context: PipelineContext, *, analyze_only: bool = False) -> None:
        super().__init__(graph, context.spec.table_properties)
        self.context = context
        self.analyze_only = analyze_only
        self._resolving: list[str] = []  # datasets being resolved, outermost first (cycle detection)
        self._building: list[ResolvedFlow] = []  # flows whose function is running, innermost last
        self._restrict: Mapping[str, Column] | None = None
        self._stand_ins: Mapping[str, DataFrame] | None = None
        self._lock = threading.RLock()  # views refresh from several foreachBatch threads
        self.warnings: list[str] = []  # what an analysis found but let pass (an unreachable broker)
        self._existing: set[str] = set()  # tables known to exist (see resolve)
        #: What each existing table held of its properties when the run began (see resolve).
        self.settings: dict[str, dict[str, str]] = {}

    # -- resolution -------------------------------------------------------------------------------------

    def resolve(self, existing: Collection[str] | Mapping[str, Mapping[str, str]] = ()) -> Resolver:
        """Resolve every dataset (in definition order, upstream first) and return ``self``.

        Args:
            existing: Tables known to exist (read just before): not created again. Delta's "create if
                not exists" of an existing table changes nothing, but costs a Delta command per table
                and run (0.05-0.15 s). A mapping gives each one's properties too (:attr:`settings`).

        """
        self._existing = set(existing)
        if isinstance(existing, Mapping):
            self.settings = {name: dict(settings) for name, settings in existing.items()}
        with self._active():
            for name in self.graph.datasets:
                self._dataset(name)
        return self

    @contextmanager
    def _active(self, spark: SparkSession | None = None) -> Iterator[None]:
        context = self.context if spark is None else dataclasses.replace(self.context, spark=spark)
        with activate(context), resolving(self):
            yield

    def note_source(self, label: str) -> None:
        """Record that the flow being built reads outside source ``label``."""
        if self._building:
            self._building[-1].sources.append(label)

    def warn(self, message: str) -> None:
        """Record a problem that stops a run but not an analysis (shown once)."""
        if message not in self.warnings:
            self.warnings.append(message)

    def _dataset(self, name: str) -> None:
        if name in self.kinds:
            return
        dataset = self.graph.datasets[name]
        self._resolving.append(name)
        try:
            resolved = [self._build(flow) for flow in self.graph.flows_into(name)]
        finally:
            self._resolving.pop()
        self.kinds[name] = self._kind(dataset, resolved)
        self.schemas[name] = self._schema(dataset, resolved)
        if dataset.stored:
            properties = self.table_properties(name)
            if not self.analyze_only and name not in self._existing:
                from deltaflow.sinks.tables import ensure_table

                ensure_table(self.context.spark, dataset, self.context.layout.table(name), self.schemas[name],
                             properties)

    def _build(self, flow: Flow) -> ResolvedFlow:
        resolved = self._run(flow)
        resolved.df = self._checked(resolved)
        self.flows[flow.name] = resolved
        return resolved

    def _run(self, flow: Flow) -> ResolvedFlow:
        """Call the flow's function, recording what it reads."""
        resolved = ResolvedFlow(flow)
        self._building.append(resolved)
        try:
            df = flow.func()
        except DeltaflowError:
            raise
        except Exception as exc:
            raise GraphError(f"flow '{flow.name}' failed to build: {first_line(exc)}",
                             location=_failing_line(exc, flow)) from exc
        finally:
            self._building.pop()
        if not hasattr(df, "isStreaming"):
            raise GraphError(f"flow '{flow.name}' returned {type(df).__name__}, not a DataFrame",
                             location=str(flow.location))
        resolved.df = df
        return resolved

    def _checked(self, resolved: ResolvedFlow) -> DataFrame:
        """The flow's DataFrame with its expectations applied (see :mod:`deltaflow.define.expectations`)."""
        from deltaflow.define.expectations import carries_failures, checked, expectations_of

        flow, df = resolved.flow, resolved.df
        rules = expectations_of(flow.func)
        resolved.quarantines = carries_failures(df) or any(r.action == "quarantine" for r in rules)
        if not rules and not resolved.quarantines:
            return df
        target = self.graph.datasets[flow.target]
        if not df.isStreaming:
            raise GraphError(f"flow '{flow.name}' has expectations but returns a batch DataFrame; "
                             "expectations work on streaming tables for now", location=str(flow.location))
        if target.kind != "table" and resolved.quarantines:
            raise GraphError(f"flow '{flow.name}' quarantines into {KIND_LABELS[target.kind]} "
                             f"'{flow.target}'; quarantine works for streaming tables",
                             location=str(flow.location))
        try:
            result = checked(df, flow.name, rules)
            result.schema  # analyse now: a bad condition is an error at the definition  # noqa: B018
        except Exception as exc:
            raise GraphError(f"flow '{flow.name}': an expectation does not analyse: {first_line(exc)}",
                             location=str(flow.location)) from exc
        return result

    def _kind(self, dataset: Dataset, flows: list[ResolvedFlow]) -> DatasetKind:
        if dataset.kind == "materialized_view" and flows[0].streaming:
            raise GraphError(f"materialized view '{dataset.name}' returns a streaming DataFrame",
                             location=str(dataset.location),
                             hint="read inputs with spark.read.table / dp.read, or declare it with @dp.table")
        if dataset.kind == "table" and len(flows) == 1 and not flows[0].streaming and dataset.schema is None:
            return "materialized_view"  # @dp.table over a batch query, as in Spark Declarative Pipelines
        if dataset.kind in ("table", "sink"):
            for batch in (f for f in flows if not f.streaming):
                label = KIND_LABELS[dataset.kind]
                raise GraphError(f"flow '{batch.flow.name}' into {label} '{dataset.name}' returns a batch "
                                 "DataFrame", location=str(batch.flow.location),
                                 hint="read its input with spark.readStream.table / dp.read_stream")
        return dataset.kind

    def _schema(self, dataset: Dataset, flows: list[ResolvedFlow]) -> StructType:
        if dataset.schema is not None:
            return self.context.spark.createDataFrame([], dataset.schema).schema
        if flows[0].flow.cdc is not None:
            from deltaflow.sinks.cdc_target import target_schema

            return target_schema(flows[0].flow, flows[0].df.schema)
        from deltaflow.define.expectations import table_schema

        return table_schema(flows[0].df)

    # -- reads ------------------------------------------------------------------------------------------

    def read(self, name: str, *, streaming: bool, options: Mapping[str, Any] | None = None) -> DataFrame:
        """A DataFrame over pipeline dataset ``name``, recording the read on the flow being built.

        Raises:
            GraphError: Unknown dataset, a cycle, a streaming read of a batch-only dataset, or an unknown
                option; located at the line of the read.

        """
        options = dict(options or {})
        reader = self._building[-1] if self._building else None
        where = self._read_location(reader)
        what = f"flow '{reader.flow.name}'" if reader else "a definition"
        if name not in self.graph.datasets:
            raise GraphError(f"{what} reads unknown dataset '{name}'{suggest(name, self.graph.datasets)}",
                             location=where, hint="declare it with @dp.table / @dp.materialized_view, or "
                             "read an external Delta table with spark.read.format('delta').load(path)")
        if name in self._resolving:
            cycle = " -> ".join([*self._resolving[self._resolving.index(name):], name])
            raise GraphError(f"cycle in the dataset graph (each reads the next): {cycle}", location=where)
        reads.check_options(options, reads.DELTA_STREAM_OPTIONS if streaming else reads.DELTA_BATCH_OPTIONS,
                            name, where)
        self._dataset(name)
        changes = reads.reads_changes(options)
        if reader is not None:
            reader.inputs[name] = "stream" if streaming else "batch"
            reader.options[name] = options
            if changes:
                reader.changes.add(name)
            if {"versionasof", "timestampasof"} & {k.lower() for k in options}:
                reader.pinned.add(name)
        self._check_read(name, what, where, streaming, options)
        if self.kinds[name] == "temporary_view":
            return self._read_view(name, streaming, where)
        if streaming and reader is not None:
            options = {**self._starting_version(reader.flow, name), **options}
        return self._read_table(name, streaming, options, changes)

    def _starting_version(self, flow: Flow, table: str) -> dict[str, Any]:
        """Where a flow that left its carrier starts reading ``table`` (see :mod:`.carry_plan`), if it did."""
        if self.analyze_only:
            return {}
        layout = self.context.layout
        start = layout.start_of(layout.checkpoint(flow.target, flow.name))
        return {"startingVersion": start[1]} if start is not None and start[0] == table else {}

    def _check_read(self, name: str, what: str, where: str, streaming: bool,
                    options: Mapping[str, Any]) -> None:
        kind, changes = self.kinds[name], reads.reads_changes(options)
        if kind == "sink":
            raise GraphError(f"{what} reads sink '{name}'; sinks are written, not read", location=where)
        travel = {"versionasof", "timestampasof"} & {k.lower() for k in options}
        if len(travel) > 1:
            raise GraphError(f"{what} reads '{name}' as of a version and a timestamp; give one",
                             location=where)
        if kind == "temporary_view":
            if changes or travel:
                how = "the change feed" if changes else "an earlier version"
                raise GraphError(f"{what} reads {how} of temporary view '{name}'", location=where,
                                 hint="read the table it reads")
            return
        if streaming and kind == "materialized_view" and not changes:
            raise GraphError(f"{what} reads materialized view '{name}' as a stream; materialized views are "
                             "batch-only", location=where, hint=f"use spark.read.table('{name}')")
        if changes and not self.records_changes(name):
            raise GraphError(f"{what} reads the change feed of '{name}', which does not record one",
                             location=where, hint=f"declare '{name}' with table_properties="
                             f"{{'{reads.CHANGE_FEED}': 'true'}} or in deltaflow.yml table_properties")
        passes = {"readchangefeed", "skipchangecommits", "ignorechanges"} & {k.lower() for k in options}
        if streaming and kind == "table" and self.rewrites(name) and not passes:
            raise GraphError(f"{what} streams auto CDC target '{name}', whose MERGEs update and delete rows",
                             location=where, hint=f"stream its change feed: dp.read_changes('{name}', "
                             "stream=True), or pass skipChangeCommits=True for its inserts only")

    def _read_view(self, name: str, streaming: bool, where: str) -> DataFrame:
        view = self.flows[name]
        df = view.df
        # built again over restricted reads, or on the session a refresh runs on: a SQL query reading the
        # view finds it only among that session's temporary views (deltaflow.sources.sql)
        again = self._restrict is not None or self._stand_ins is not None
        if again or not _same_session(df, current().spark):
            df = self._call(view.flow)
        if bool(df.isStreaming) != streaming:
            shape, verb = (("streaming", "dp.read_stream / spark.readStream.table") if df.isStreaming
                           else ("batch", "dp.read / spark.read.table"))
            raise GraphError(f"temporary view '{name}' is a {shape} query but is read as a "
                             f"{'stream' if streaming else 'batch'}", location=where,
                             hint=f"read it with {verb}")
        return df

    def _read_table(self, name: str, streaming: bool, options: Mapping[str, Any], changes: bool) -> DataFrame:
        spark = current().spark  # the session the flow is built on (a view refresh: its batch's own)
        schema = reads.with_change_columns(self.schemas[name]) if changes else self.schemas[name]
        if self.analyze_only:
            return reads.placeholder(spark, schema, streaming)
        if self._stand_ins is not None and name in self._stand_ins:
            return self._stand_ins[name]
        path = self.context.layout.table(name)
        if streaming:
            return spark.readStream.format("delta").options(**options).load(path)
        df = spark.read.format("delta").options(**options).load(path)
        restrict = (self._restrict or {}).get(name)
        return df.where(restrict) if restrict is not None else df

    def _read_location(self, reader: ResolvedFlow | None) -> str:
        if reader is None:
            return "<unknown>"
        file = Path(reader.flow.location.file).name
        # the frames walked, not inspect.stack(), which reads every frame's source
        frame: FrameType | None = sys._getframe()
        while frame is not None:
            if Path(frame.f_code.co_filename).name == file:
                return f"{reader.flow.location.file}:{frame.f_lineno}"
            frame = frame.f_back
        return str(reader.flow.location)

    # -- building a flow again ----------------------------------------------------------------------------

    def rebuild(self, flow: Flow, restrict: Mapping[str, Column] | None = None,
                spark: SparkSession | None = None, stand_ins: Mapping[str, DataFrame] | None = None,
                ) -> DataFrame:
        """Build ``flow``'s DataFrame again, reading only the rows ``restrict`` selects from each table.

        Args:
            flow: A materialized view's flow.
            restrict: Per table read, a filter on its rows.
            spark: The session to build it on (default: the pipeline's), e.g. a micro-batch's own, so
                that the write's session settings (its transaction id) reach no other flow.
            stand_ins: Per table read, a DataFrame read instead (e.g. a micro-batch of its new rows).

        """
        with self._lock:
            self._restrict, self._stand_ins = restrict, stand_ins
            try:
                with self._active(spark):
                    return self._call(flow)
            finally:
                self._restrict = self._stand_ins = None

    def build_over(self, flow: Flow, stand_ins: Mapping[str, DataFrame]) -> DataFrame:
        """Build ``flow`` (expectations included) with batch DataFrames standing in for tables it reads.

        Used to re-feed quarantined rows: the stand-in holds the input rows they came from.
        """
        from deltaflow.define.expectations import checked, expectations_of

        return checked(self.rebuild(flow, stand_ins=stand_ins), flow.name, expectations_of(flow.func))

    def rebuild_flow(self, name: str) -> ResolvedFlow:
        """Build flow ``name`` again, over the tables as they are now, and keep the result."""
        with self._lock, self._active():
            return self._build(self.graph.flows[name])

    def _call(self, flow: Flow) -> DataFrame:
        return self._run(flow).df


def _same_session(df: DataFrame, spark: SparkSession) -> bool:
    return bool(df.sparkSession._jsparkSession.equals(spark._jsparkSession))


def _failing_line(exc: BaseException, flow: Flow) -> str:
    file = Path(flow.location.file).name
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).name == file]
    return f"{flow.location.file}:{frames[-1].lineno}" if frames else str(flow.location)
