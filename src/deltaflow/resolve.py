"""Resolve a pipeline graph: run each flow's function, learn what it reads, and check the whole.

A flow's inputs are only known once its function runs: ``spark.readStream.table("bronze")``,
``spark.read.table(...)``, ``dp.read_stream(...)`` and ``dp.read(...)`` all land in :meth:`Resolver.read`,
which resolves the dataset read first (depth first, so a cycle is caught where it closes), records the
edge, and returns a DataFrame over the dataset's Delta table. When only analysing (``deltaflow dry-run``)
tables are never created: reads return empty DataFrames of the right schema, and nothing is written.

Example:
    >>> resolved = Resolver(graph, context, analyze_only=True).resolve()  # doctest: +SKIP
    >>> resolved.flows["silver_clicks"].inputs
    {'bronze_clicks': 'stream'}

"""

from __future__ import annotations

import inspect
import re
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from deltaflow.context import PipelineContext, activate
from deltaflow.errors import DeltaflowError, GraphError
from deltaflow.graph import KIND_LABELS, Dataset, DatasetKind, Flow, PipelineGraph, suggest

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

ReadMode = Literal["stream", "batch"]

#: Delta streaming source options deltaflow passes through (Spark ignores misspelt options silently).
DELTA_STREAM_OPTIONS = (
    "maxFilesPerTrigger", "maxBytesPerTrigger", "startingVersion", "startingTimestamp", "skipChangeCommits",
    "ignoreDeletes", "ignoreChanges", "withEventTimeOrder", "readChangeFeed", "excludeRegex",
    "failOnDataLoss", "schemaTrackingLocation", "allowSourceColumnRenameAndDrop",
)
#: The table property that makes Delta record a table's Change Data Feed, and the columns a read of it adds.
CHANGE_FEED = "delta.enableChangeDataFeed"
CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")
DELTA_BATCH_OPTIONS = ("versionAsOf", "timestampAsOf", "readChangeFeed", "startingVersion",
                       "endingVersion", "startingTimestamp", "endingTimestamp")


@dataclass
class ResolvedFlow:
    """A flow with its DataFrame and the datasets it reads (temporary views included)."""

    flow: Flow
    df: DataFrame
    inputs: dict[str, ReadMode] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    changes: set[str] = field(default_factory=set)

    @property
    def streaming(self) -> bool:
        """Whether the flow's query is a streaming one."""
        return bool(self.df.isStreaming)


_RESOLVER: ContextVar[Resolver | None] = ContextVar("deltaflow_resolver", default=None)


def active_resolver() -> Resolver:
    """The resolver of the flow being built.

    Raises:
        GraphError: Outside a dataset function run by deltaflow.

    """
    resolver = _RESOLVER.get()
    if resolver is None:
        raise GraphError("pipeline datasets can only be read inside a dataset function run by deltaflow",
                         hint="call dp.read_stream / spark.readStream.table inside a @dp.table function")
    return resolver


def note_source(label: str) -> None:
    """Record that the flow being built reads an outside source (shown by ``deltaflow graph``)."""
    resolver = _RESOLVER.get()
    if resolver is not None and resolver._building:
        resolver._building[-1].sources.append(label)


class Resolver:
    """Resolves datasets and flows, and answers questions about the resulting graph.

    Args:
        graph: The registered definitions.
        context: The pipeline's session and spec.
        analyze_only: Never create tables; read placeholders of the right schema instead.

    """

    def __init__(self, graph: PipelineGraph, context: PipelineContext, *, analyze_only: bool = False) -> None:
        self.graph = graph
        self.context = context
        self.analyze_only = analyze_only
        self.flows: dict[str, ResolvedFlow] = {}
        self.kinds: dict[str, DatasetKind] = {}
        self.schemas: dict[str, StructType] = {}
        self._resolving: list[str] = []
        self._building: list[ResolvedFlow] = []
        self._restrict: Mapping[str, Column] | None = None
        self._stand_ins: Mapping[str, DataFrame] | None = None
        self._lock = threading.RLock()  # views refresh from several foreachBatch threads

    # -- resolution -------------------------------------------------------------------------------------

    def resolve(self) -> Resolver:
        """Resolve every dataset (in definition order, upstream first) and return ``self``."""
        with activate(self.context), self._active():
            for name in self.graph.datasets:
                self._dataset(name)
        return self

    @contextmanager
    def _active(self) -> Iterator[None]:
        token = _RESOLVER.set(self)
        try:
            yield
        finally:
            _RESOLVER.reset(token)

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
            if not self.analyze_only:
                from deltaflow.sinks.append import ensure_table

                ensure_table(self.context.spark, dataset, self.context.table_path(name), self.schemas[name],
                             properties)

    def _build(self, flow: Flow) -> ResolvedFlow:
        resolved = ResolvedFlow(flow, df=None)  # type: ignore[arg-type]  # set below
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
        resolved.df = self._checked(flow, df)
        self.flows[flow.name] = resolved
        return resolved

    def _checked(self, flow: Flow, df: DataFrame) -> DataFrame:
        """``df`` with the flow's expectations applied (see :mod:`deltaflow.expectations`)."""
        from deltaflow.expectations import FAILED, checked, expectations_of

        rules = expectations_of(flow.func)
        if not rules and FAILED not in df.columns:
            return df
        target = self.graph.datasets[flow.target]
        if not df.isStreaming:
            raise GraphError(f"flow '{flow.name}' has expectations but returns a batch DataFrame; "
                             "expectations work on streaming tables for now", location=str(flow.location))
        if target.kind != "table" and (FAILED in df.columns or any(r.action == "quarantine" for r in rules)):
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
            from deltaflow.sinks.cdc import target_schema

            return target_schema(flows[0].flow, flows[0].df.schema)
        from deltaflow.expectations import table_schema

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
        _check_options(options, DELTA_STREAM_OPTIONS if streaming else DELTA_BATCH_OPTIONS, name, where)
        self._dataset(name)
        if reader is not None:
            reader.inputs[name] = "stream" if streaming else "batch"
        kind = self.kinds[name]
        changes = str(options.get("readChangeFeed", "false")).lower() == "true"
        if reader is not None and changes:
            reader.changes.add(name)
        if kind == "sink":
            raise GraphError(f"{what} reads sink '{name}'; sinks are written, not read", location=where)
        if kind == "temporary_view":
            if changes:
                raise GraphError(f"{what} reads the change feed of temporary view '{name}'", location=where,
                                 hint="read the change feed of the table it reads")
            return self._read_view(name, streaming, where)
        if streaming and kind == "materialized_view" and not changes:
            raise GraphError(f"{what} reads materialized view '{name}' as a stream; materialized views are "
                             "batch-only", location=where, hint=f"use spark.read.table('{name}')")
        if changes and self.table_properties(name).get(CHANGE_FEED, "false").lower() != "true":
            raise GraphError(f"{what} reads the change feed of '{name}', which does not record one",
                             location=where, hint=f"declare '{name}' with table_properties="
                             f"{{'{CHANGE_FEED}': 'true'}} or in deltaflow.yml table_properties")
        passes = {"readchangefeed", "skipchangecommits", "ignorechanges"} & {k.lower() for k in options}
        if streaming and kind == "table" and self.rewrites(name) and not passes:
            raise GraphError(f"{what} streams auto CDC target '{name}', whose MERGEs update and delete rows",
                             location=where, hint=f"stream its change feed: dp.read_changes('{name}', "
                             "stream=True), or pass skipChangeCommits=True for its inserts only")
        return self._read_table(name, streaming, options, changes)

    def _read_view(self, name: str, streaming: bool, where: str) -> DataFrame:
        view = self.flows[name]
        df = view.df if self._restrict is None and self._stand_ins is None else self._call(view.flow)
        if bool(df.isStreaming) != streaming:
            shape, verb = (("streaming", "dp.read_stream / spark.readStream.table") if df.isStreaming
                           else ("batch", "dp.read / spark.read.table"))
            raise GraphError(f"temporary view '{name}' is a {shape} query but is read as a "
                             f"{'stream' if streaming else 'batch'}", location=where,
                             hint=f"read it with {verb}")
        return df

    def _read_table(self, name: str, streaming: bool, options: Mapping[str, Any], changes: bool) -> DataFrame:
        spark = self.context.spark
        schema = self.schemas[name]
        if changes:
            schema = _with_change_columns(schema)
        if self.analyze_only:
            return _placeholder(spark, schema, streaming)
        if self._stand_ins is not None and name in self._stand_ins:
            return self._stand_ins[name]
        path = self.context.table_path(name)
        if streaming:
            return spark.readStream.format("delta").options(**options).load(path)
        df = spark.read.format("delta").options(**options).load(path)
        restrict = (self._restrict or {}).get(name)
        return df.where(restrict) if restrict is not None else df

    def _read_location(self, reader: ResolvedFlow | None) -> str:
        if reader is None:
            return "<unknown>"
        file = Path(reader.flow.location.file).name
        for frame in inspect.stack():
            if Path(frame.filename).name == file:
                return f"{reader.flow.location.file}:{frame.lineno}"
        return str(reader.flow.location)

    # -- rebuilding a flow (materialized view refresh) ----------------------------------------------------

    def rebuild(self, flow: Flow, restrict: Mapping[str, Column] | None = None) -> DataFrame:
        """Build ``flow``'s DataFrame again, reading only the rows ``restrict`` selects from each table."""
        with self._lock:
            self._restrict = restrict
            try:
                with activate(self.context), self._active():
                    return self._call(flow)
            finally:
                self._restrict = None

    def build_over(self, flow: Flow, stand_ins: Mapping[str, DataFrame]) -> DataFrame:
        """Build ``flow`` (expectations included) with batch DataFrames standing in for tables it reads.

        Used to re-feed quarantined rows: the stand-in holds the input rows they came from.
        """
        from deltaflow.expectations import checked, expectations_of

        with self._lock:
            self._stand_ins = stand_ins
            try:
                with activate(self.context), self._active():
                    df = self._call(flow)
            finally:
                self._stand_ins = None
        return checked(df, flow.name, expectations_of(flow.func))

    def rebuild_flow(self, name: str) -> ResolvedFlow:
        """Build flow ``name`` again, over the tables as they are now, and keep the result."""
        with self._lock, activate(self.context), self._active():
            return self._build(self.graph.flows[name])

    def _call(self, flow: Flow) -> DataFrame:
        self._building.append(ResolvedFlow(flow, df=None))  # type: ignore[arg-type]
        try:
            return flow.func()
        finally:
            self._building.pop()

    # -- questions about the graph ------------------------------------------------------------------------

    def table_properties(self, dataset: str) -> dict[str, str]:
        """The Delta table properties of ``dataset``: the spec's defaults, then the dataset's own.

        A table holding change-feed rows (``_change_type`` ...) cannot record a change feed of its own, so
        the spec's default does not apply to it, and the table's own setting is an error.

        Raises:
            GraphError: The dataset asks for a change feed but has the change feed's columns.

        """
        own = self.graph.datasets[dataset].table_properties
        properties = {**self.context.spec.table_properties, **own}
        schema = self.schemas.get(dataset)
        reserved = [c for c in CHANGE_COLUMNS if schema is not None and c in schema.names]
        if reserved and properties.get(CHANGE_FEED, "false").lower() == "true":
            if CHANGE_FEED in own:
                raise GraphError(f"'{dataset}' holds the change-feed columns {', '.join(reserved)}, so it "
                                 "cannot record a change feed of its own",
                                 location=str(self.graph.datasets[dataset].location),
                                 hint=f"rename those columns, or drop {CHANGE_FEED} from its properties")
            del properties[CHANGE_FEED]
        return properties

    def rewrites(self, dataset: str) -> bool:
        """Whether ``dataset``'s table gets commits that change or remove rows (views, auto CDC targets)."""
        return (self.kinds.get(dataset) == "materialized_view"
                or any(f.cdc is not None for f in self.graph.flows_into(dataset)))

    def inputs(self, dataset: str) -> dict[str, ReadMode]:
        """The datasets ``dataset``'s flows read directly (temporary views included)."""
        result: dict[str, ReadMode] = {}
        for flow in self.graph.flows_into(dataset):
            result.update(self.flows[flow.name].inputs)
        return result

    def stored_inputs(self, dataset: str) -> dict[str, ReadMode]:
        """Like :meth:`inputs`, with temporary views replaced by the tables they read."""
        result: dict[str, ReadMode] = {}
        for name, mode in self.inputs(dataset).items():
            if self.kinds[name] == "temporary_view":
                result.update(self.stored_inputs(name))
            else:
                result[name] = mode
        return result

    def upstream(self, names: set[str]) -> set[str]:
        """``names`` and every dataset they read, transitively."""
        return _closure(names, self.inputs)

    def downstream(self, names: set[str]) -> set[str]:
        """``names`` and every dataset reading them, transitively."""
        return _closure(names, lambda name: [d for d in self.graph.datasets if name in self.inputs(d)])

    def order(self) -> list[str]:
        """Every dataset, each after all the datasets it reads."""
        done: list[str] = []

        def visit(name: str) -> None:
            if name not in done:
                for upstream in self.inputs(name):
                    visit(upstream)
                done.append(name)

        for name in self.graph.datasets:
            visit(name)
        return done


def _closure(names: set[str], neighbours: Callable[[str], Iterable[str]]) -> set[str]:
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(neighbours(name))
    return seen


def _check_options(options: Mapping[str, Any], known: tuple[str, ...], name: str, where: str) -> None:
    lower = {k.lower(): k for k in known}
    for key in options:
        if key.lower() not in lower:
            raise GraphError(f"unknown Delta source option '{key}' reading '{name}'{suggest(key, known)}",
                             location=where, hint="options: " + ", ".join(known))


def _placeholder(spark: Any, schema: StructType, streaming: bool) -> DataFrame:
    """An empty DataFrame with ``schema``: what a read analyses against in a dry run."""
    if not streaming:
        return spark.createDataFrame([], schema)  # type: ignore[no-any-return]
    from pyspark.sql import functions as F

    rate = spark.readStream.format("rate").load()
    return rate.select([F.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields])  # type: ignore[no-any-return]


def _python_error(text: str) -> str | None:
    """The error a Python traceback inside a Spark error ends with (a foreachBatch function raised)."""
    if "Traceback (most recent call last):" not in text:
        return None
    python = text.rsplit("Traceback (most recent call last):", 1)[1].split("\n\tat ", 1)[0]
    raised = re.findall(r"^([A-Za-z_][\w.]*): (.+)$", python, re.MULTILINE)
    if not raised:
        return None
    name, message = raised[-1]
    return message if re.match(r"DF-[A-Z]+ ", message) else f"{name.rsplit('.', 1)[-1]}: {message}"


def _with_change_columns(schema: StructType) -> StructType:
    """``schema`` and the columns a change-feed read adds."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

    return StructType([*schema.fields, StructField("_change_type", StringType()),
                       StructField("_commit_version", LongType()),
                       StructField("_commit_timestamp", TimestampType())])


def _failing_line(exc: BaseException, flow: Flow) -> str:
    file = Path(flow.location.file).name
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).name == file]
    return f"{flow.location.file}:{frames[-1].lineno}" if frames else str(flow.location)


def first_line(exc: BaseException) -> str:
    r"""One line saying why ``exc`` happened: the root cause's message (Spark wraps it), at most 300 chars.

    Example:
        >>> first_line(ValueError("bad value\nmore detail"))
        'bad value'

    """
    if isinstance(exc, DeltaflowError):  # ours: already one line, with its location and hint
        return str(exc).splitlines()[0]
    while getattr(exc, "_cause", None) is not None:  # pyspark's CapturedException chain
        exc = exc._cause  # type: ignore[attr-defined]
    text = str(getattr(exc, "desc", None) or exc).strip()
    trace = str(getattr(exc, "stackTrace", None) or getattr(exc, "_stackTrace", None) or "")
    if (python := _python_error(text + "\n" + trace)) is not None:
        return python[:300]
    causes = [line.split("Caused by:", 1)[1] for line in (text + "\n" + trace).splitlines()
              if line.lstrip().startswith("Caused by:")]
    if causes:
        text = re.sub(r"^\s*[\w.$]+(Exception|Error): ", "", causes[-1])
    text = re.sub(r"\s*SQLSTATE: \w+", "", text).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


__all__ = ["KIND_LABELS", "ReadMode", "ResolvedFlow", "Resolver", "active_resolver", "first_line",
           "note_source"]
