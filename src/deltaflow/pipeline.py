"""The facade: one object for a pipeline, and every verb on it.

A :class:`Pipeline` is a spec (``deltaflow.yml``), its storage layout and, once something needs Spark, its
SparkSession. Every CLI verb, the demo, the tests and the benchmarks assemble a pipeline here and nowhere
else: load, analyse (dry-run), run, replay, rewind, the table upkeep (optimize, vacuum) and the read verbs
(status, show, sql, changes, history, quarantine:
:class:`~deltaflow.commands.reading.ReadVerbs`).

Examples:
    >>> pipeline = Pipeline.load("examples/orders")  # doctest: +SKIP
    >>> pipeline.dry_run().flows.keys()  # doctest: +SKIP
    dict_keys(['bronze_orders', 'silver_orders', 'gold_daily_sales'])
    >>> outcomes = pipeline.run("available_now")  # doctest: +SKIP
    >>> [o.state for o in outcomes]  # doctest: +SKIP
    ['completed', 'completed', 'completed']

Nothing here imports Spark until a verb needs it: the read verbs run without a JVM.

"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deltaflow.commands.reading import ReadVerbs
from deltaflow.spec import Spec, TriggerMode, load_spec
from deltaflow.storage import StorageLayout

if TYPE_CHECKING:
    from datetime import datetime, timedelta

    from pyspark.sql import SparkSession

    from deltaflow.commands.optimize import OptimizeResult
    from deltaflow.commands.plan import Plan
    from deltaflow.commands.replay import ReplayResult
    from deltaflow.commands.rewind import Rewind
    from deltaflow.commands.vacuum import VacuumResult
    from deltaflow.define.context import PipelineContext
    from deltaflow.define.graph import Flow, PipelineGraph
    from deltaflow.resolve.resolver import Resolver
    from deltaflow.runtime.metastore import Registration
    from deltaflow.runtime.nothing_new import NewInput
    from deltaflow.runtime.outcomes import FlowOutcome, MessageCallback, ProgressCallback
    from deltaflow.runtime.run_plan import RunPlan
    from deltaflow.runtime.runner import PipelineRun
    from deltaflow.runtime.triggers import Trigger
    from deltaflow.ui.app import UiServer


class Pipeline(ReadVerbs):
    """A pipeline project, and every verb deltaflow has for it.

    Args:
        spec: The validated spec.
        spark: A running SparkSession to use (tests, notebooks); default: one built from the spec on
            first need.
        spark_conf: Spark settings that win over deltaflow's defaults and the spec's (benchmarks, tests).

    """

    def __init__(self, spec: Spec, *, spark: SparkSession | None = None,
                 spark_conf: Mapping[str, str] | None = None) -> None:
        self.spec = spec
        self.layout = StorageLayout.of(spec)
        self.spark_conf = dict(spark_conf or {})
        self._spark = spark
        self._graph: PipelineGraph | None = None
        self._storage_checked = False
        self._session_given = spark is not None  # started elsewhere: it lacks the spec's s3 keys
        self._session_ready = False  # the spec's keys and parameters set on the session
        self._registration: Registration | None = None  # the spec's metastore, once a run started
        self.small_run = False  # the run reads little: its JVM compiles for a quick start (see run)

    @classmethod
    def load(cls, spec: Path | str | None = None, *, env: Mapping[str, str] | None = None,
             spark: SparkSession | None = None, spark_conf: Mapping[str, str] | None = None,
             reading: bool = False) -> Pipeline:
        """Find, read and validate the spec (a file, a folder holding one, or the nearest one upward).

        Args:
            spec: ``deltaflow.yml`` or its folder (default: the nearest one from the current folder up).
            env: Values for the spec's ``${VAR}`` references that win over the environment's.
            spark: See :class:`Pipeline`.
            spark_conf: See :class:`Pipeline`.
            reading: For verbs that only read the storage (status, history, ui...): a ``${VAR}`` they do not
                need may be unset (see :func:`~deltaflow.spec.parse_spec`).

        Raises:
            ConfigError: One line naming the file and the field at fault.

        """
        given = Path(spec) if spec is not None else None
        environ = None if env is None else {**os.environ, **env}
        return cls(load_spec(given, env=environ, reading=reading), spark=spark, spark_conf=spark_conf)

    @property
    def name(self) -> str:
        """The pipeline's name."""
        return self.spec.name

    def storage(self) -> StorageLayout:
        """The storage layout, once the storage has answered (checked on first call, before any write).

        Raises:
            StorageError: One line naming the endpoint, the credentials or the bucket at fault.

        """
        if not self._storage_checked:
            self.layout.check()
            self._storage_checked = True
        return self.layout

    # -- Spark and the definitions ------------------------------------------------------------------------

    def session(self) -> SparkSession:
        """The pipeline's SparkSession, started on first call (several seconds)."""
        if self._spark is None:
            from deltaflow.runtime.session import build_session

            self._spark = build_session(self.spec, extra=self.spark_conf, small_run=self.small_run)
        if not self._session_ready:
            if self._session_given and self.spec.s3 is not None:
                from deltaflow.runtime.session import use_storage_keys

                use_storage_keys(self._spark, self.spec)
            for key, value in self.spec.parameters.items():  # SDP's definitions read them with spark.conf.get
                self._spark.conf.set(key, value)
            self._session_ready = True
        return self._spark

    @property
    def graph(self) -> PipelineGraph:
        """The datasets and flows the definition files register (loaded once, without Spark if it can)."""
        if self._graph is None:
            from deltaflow.define.loader import load_graph

            self._graph = load_graph(self.spec, start_spark=self.session)
        return self._graph

    def context(self) -> PipelineContext:
        """What a running definition may use: the session, the spec, the storage layout."""
        from deltaflow.define.context import PipelineContext

        return PipelineContext(spark=self.session(), spec=self.spec, layout=self.layout)

    def dry_run(self) -> Resolver:
        """Resolve and analyse every flow against empty DataFrames; nothing is written.

        Raises:
            GraphError: The first problem, naming the definition's file and line.

        """
        from deltaflow.resolve.resolver import Resolver
        from deltaflow.runtime.triggers import Trigger, flow_triggers

        if self._spark is None:  # Spark's scratch space goes to a temp folder, not into storage
            scratch = tempfile.mkdtemp(prefix="deltaflow-analyse-")
            weakref.finalize(self, shutil.rmtree, scratch, ignore_errors=True)  # gone with the pipeline
            self.spark_conf = {"spark.sql.warehouse.dir": scratch, "spark.local.dir": scratch,
                               **self.spark_conf}
        graph = self.graph
        flow_triggers(self.spec, graph.flows, Trigger(self.spec.trigger.mode), mode_given=False)
        return Resolver(graph, self.context(), analyze_only=True).resolve()

    def resolve(self) -> Resolver:
        """Resolve every flow over the pipeline's tables (creating the tables that do not exist yet)."""
        from deltaflow.resolve.resolver import Resolver

        return Resolver(self.graph, self.context()).resolve()

    # -- running ------------------------------------------------------------------------------------------

    def start(self, mode: TriggerMode | None = None, interval: str | None = None, *,
              plan: RunPlan | None = None, on_batch: ProgressCallback | None = None,
              on_message: MessageCallback | None = None) -> PipelineRun:
        """Resolve the pipeline and start its flows; ``wait`` on the result (or ``stop`` it).

        Args:
            mode: ``available_now``, ``continuous`` or ``once``; it wins over per-flow modes of the spec
                (default: the spec's trigger, with its per-flow modes).
            interval: The trigger interval of continuous flows (default: the spec's).
            plan: What to run and what to rebuild (default: everything, nothing rebuilt).
            on_batch: Told about every micro-batch that read rows.
            on_message: Told about longer steps (full refreshes).

        """
        from deltaflow.observe.graph_record import write_graph_record
        from deltaflow.runtime.runner import PipelineRun
        from deltaflow.runtime.triggers import flow_triggers

        self.storage()  # before Spark: a wrong endpoint or bucket is one line, nothing written
        trigger = self.trigger(mode, interval)
        graph = self.graph
        if plan is not None:
            plan.check(graph)
        registration = self._registration = self._registration_of(on_message)
        if registration is not None:
            registration.check()  # a name another pipeline holds: refused before anything is written
        run = PipelineRun(self.context(), graph, trigger, on_batch=on_batch, plan=plan,
                          flow_triggers=flow_triggers(self.spec, graph.flows, trigger, mode_given=bool(mode)),
                          on_message=on_message)
        try:
            run.start()
        except BaseException:
            run.abort()
            raise
        write_graph_record(self.layout, run.resolver, self.name, trigger.describe(), self.fingerprint())
        if registration is not None:
            registration.start()
        return run

    def _registration_of(self, on_message: MessageCallback | None) -> Registration | None:
        """The run's registration of its tables in the spec's metastore (None without one)."""
        if self.spec.metastore is None:
            return None
        from deltaflow.runtime.metastore import Registration

        return Registration(self.session(), self.spec, self.layout, self.tables(),
                            on_message or (lambda message: None))

    def run(self, mode: TriggerMode | None = None, interval: str | None = None, *,
            stop: threading.Event | None = None, **options: Any) -> list[FlowOutcome]:
        """Run the flows until they finish (or ``stop`` is set), and say how each ended.

        Takes :meth:`start`'s arguments.

        Raises:
            FlowError: One or more flows failed, naming each with its definition's file:line and cause.

        """
        say = options.get("on_message") or (lambda message: None)
        news = self.new_input(mode, options.get("plan"))
        quiet = self.nothing_new(mode, options.get("plan"), news)
        if quiet is not None:
            say("nothing new since the last run: no flow started, Spark not started")
            return quiet
        if news.small and self._spark is None:
            self.small_run = True
            say(f"a small run ({news.describe()}): Spark's JVM set for a quick start")
        run = self.start(mode, interval, **options)
        try:
            return run.finish(stop or threading.Event())
        finally:
            if self._registration is not None:  # the tables the run made after it started
                self._registration.finish()

    def fingerprint(self) -> str:
        """The digest of the spec and the definition files (see ``loader.definitions_fingerprint``)."""
        from deltaflow.define.loader import definitions_fingerprint

        return definitions_fingerprint(self.spec)

    def reason_to_start(self, mode: TriggerMode | None = None, plan: RunPlan | None = None) -> str | None:
        """Why a run must start Spark; None when its flows all stop by themselves and none has anything new.

        Checked without a JVM; see :mod:`deltaflow.runtime.nothing_new`.
        """
        return self.new_input(mode, plan).reason

    def new_input(self, mode: TriggerMode | None = None, plan: RunPlan | None = None) -> NewInput:
        """What a run has to read, told without a JVM: :meth:`reason_to_start`, and how much where known."""
        from deltaflow.runtime import nothing_new
        from deltaflow.runtime.run_plan import RunPlan
        from deltaflow.runtime.triggers import flow_triggers

        trigger, graph = self.trigger(mode), self.graph
        triggers = flow_triggers(self.spec, graph.flows, trigger, mode_given=bool(mode))
        flows = self._running_flows()
        if (plan or RunPlan()) != RunPlan():
            return nothing_new.NewInput("datasets to refresh")
        if not all(triggers.get(f.name, trigger).stops_by_itself for f in flows):
            return nothing_new.NewInput("continuous flows")
        self.storage()
        return nothing_new.new_input(self.spec, self.layout, graph, flows, self.fingerprint())

    def nothing_new(self, mode: TriggerMode | None = None, plan: RunPlan | None = None,
                    news: NewInput | None = None) -> list[FlowOutcome] | None:
        """Each flow's outcome when a run has nothing to do (:meth:`reason_to_start` is None), else None.

        Such a run ends without Spark (``nothing_new.end_quietly``). ``news``: :meth:`new_input`'s answer.
        """
        from deltaflow.runtime.nothing_new import end_quietly

        if (news or self.new_input(mode, plan)).reason is not None:
            return None
        return end_quietly(self.spec, self.layout, self._running_flows(), self.trigger(mode).describe())

    def plan(self) -> Plan:
        """What changed since the last run, and what the next run does; writes nothing (``commands.plan``)."""
        from deltaflow.commands.plan import pipeline_plan

        return pipeline_plan(self.spec, self.storage(), self.graph, self._running_flows())

    def definition_notes(self) -> list[str]:
        """One line per view or streaming table whose definition changed since the last run (dry-run)."""
        from deltaflow.runtime.definition_changes import planned_messages

        return planned_messages(self.layout, self.graph, self.spec)

    def _running_flows(self) -> list[Flow]:
        graph = self.graph
        return [f for f in graph.flows.values() if graph.datasets[f.target].runs]

    def trigger(self, mode: TriggerMode | None = None, interval: str | None = None) -> Trigger:
        """The pipeline-wide trigger of a run: ``mode``/``interval``, else the spec's."""
        from deltaflow.runtime.triggers import Trigger

        return Trigger(mode or self.spec.trigger.mode, interval or self.spec.trigger.interval)

    def replay_quarantine(self, table: str, where: str | None = None) -> ReplayResult:
        """Re-feed ``table``'s quarantined rows (those matching SQL ``where``) through its current flow.

        Exactly once; an interrupted replay is finished instead (see :mod:`deltaflow.commands.replay`).
        """
        from deltaflow.commands.arguments import check_replay
        from deltaflow.commands.replay import replay_quarantine

        check_replay(self, table)  # before Spark starts, as every check of a verb's arguments
        return replay_quarantine(self.resolve(), table, where)

    def rewind(self, table: str, version: int | None = None, timestamp: datetime | None = None, *,
               on_message: MessageCallback | None = None) -> Rewind:
        """Put ``table`` back to ``version`` (or as of ``timestamp``), and the flows writing it with it.

        The next run reads their sources again from there through the current definitions, and rebuilds
        every dataset downstream. Refused while one of those flows runs; see :mod:`deltaflow.commands.rewind`.
        """
        from deltaflow.commands.arguments import check_rewind
        from deltaflow.commands.rewind import rewind_table, running_flows

        check_rewind(self, table, version, timestamp)
        return rewind_table(self.resolve(), table, version, timestamp, lambda: running_flows(self),
                            on_message or (lambda message: None))

    def vacuum(self, tables: list[str] | None = None, retain: timedelta | None = None, *,
               dry_run: bool = False, stopped: bool = False) -> list[VacuumResult]:
        """Vacuum ``tables`` (default: all), never deleting a file a flow streaming them still reads.

        See :mod:`deltaflow.commands.vacuum` for the rule and its one-line refusals.
        """
        from deltaflow.commands.arguments import check_vacuum
        from deltaflow.commands.vacuum import vacuum_retention, vacuum_table

        check_vacuum(self, tables or [], retain, stopped)
        layout, names = self.storage(), tables or self.tables()
        for name in names:  # a refusal comes before Spark starts
            vacuum_retention(layout, self.graph.flows, name, retain, stopped)
        resolver = self.resolve()
        return [vacuum_table(resolver, name, retain, dry_run, stopped) for name in names]

    def optimize(self, tables: list[str] | None = None, zorder: list[str] | None = None,
                 where: str | None = None) -> list[OptimizeResult]:
        """Compact ``tables`` (default: all), Z-ordered by ``zorder`` (default: the spec's ``maintenance``).

        Safe while the pipeline runs: see :mod:`deltaflow.commands.optimize`.
        """
        from deltaflow.commands.arguments import check_optimize
        from deltaflow.commands.optimize import optimize_table

        check_optimize(self, tables or [], zorder)
        self.storage()
        context, orders = self.context(), self.spec.maintenance.zorder
        return [optimize_table(context, name, orders.get(name, ()) if zorder is None else zorder, where)
                for name in tables or self.tables()]

    def tables(self) -> list[str]:
        """The names of the pipeline's stored datasets (its tables and materialized views)."""
        return [n for n, d in self.graph.datasets.items() if d.stored]

    def serve_ui(self, host: str = "127.0.0.1", port: int | None = None) -> UiServer:
        """Start the live dashboard and ``/metrics`` of the pipeline on a thread (see :mod:`deltaflow.ui`).

        Examples:
            >>> print(Pipeline.load("examples/clickstream").serve_ui(port=0).url)  # doctest: +SKIP
            http://127.0.0.1:40211/

        """
        from deltaflow.ui.app import DEFAULT_PORT, UiServer

        return UiServer(self.spec, self.storage(), host, DEFAULT_PORT if port is None else port).start()
