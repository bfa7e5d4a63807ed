"""Run a pipeline: resolve it, start one query per flow in one SparkSession, watch them, stop them cleanly.

Each flow writes through its own checkpoint (see :mod:`deltaflow.runtime.checkpoints`), so each restarts
on its own; a flow that fails stops alone while the others go on: its failure goes into the event log at
once, and the run reports it at the end. Flows that stop by themselves (available-now, once) start once the
flows they read from have finished, so one run carries new data from bronze to gold; continuous flows all
start at once. A stop request (Ctrl-C, SIGTERM) lets each flow finish the batch it is writing, then stops it.

Build it through the facade, :meth:`deltaflow.pipeline.Pipeline.start` / ``run``.

Examples:
    >>> run = PipelineRun(context, graph, Trigger("available_now"))  # doctest: +SKIP
    >>> run.start()  # doctest: +SKIP
    >>> outcomes = run.finish(threading.Event())  # doctest: +SKIP

"""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from deltaflow.errors import LeaseError, StorageError, first_line
from deltaflow.resolve.resolver import Resolver
from deltaflow.runtime import holdback
from deltaflow.runtime.carry_plan import (
    CarryPlan,
    finish_leaving,
    join_caught_up,
    leave,
    leaving,
    plan_carries,
    recorded_carriers,
)
from deltaflow.runtime.definition_changes import DefinitionChanges
from deltaflow.runtime.event_log import REFRESH_KEY, EventLog, end_event, refresh_event
from deltaflow.runtime.listener import event_log_listener
from deltaflow.runtime.maintenance import Maintainer
from deltaflow.runtime.outcomes import BatchProgress, FlowOutcome, MessageCallback, ProgressCallback
from deltaflow.runtime.refresh import FullRefresh
from deltaflow.runtime.run_plan import RunPlan
from deltaflow.runtime.scheduling import flow_depths, scheduler_pool
from deltaflow.runtime.stopping import stop_between_batches
from deltaflow.runtime.table_check import check_tables
from deltaflow.runtime.triggers import Trigger
from deltaflow.sinks.materialize import outdated
from deltaflow.sinks.tables import hold_declared_properties
from deltaflow.sinks.writer import FlowWriters
from deltaflow.storage.lease import TableLeases, lease_ttl

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

    from deltaflow.define.context import PipelineContext
    from deltaflow.define.graph import Flow, PipelineGraph
    from deltaflow.resolve.reads import ReadMode

POLL_SECONDS = 0.2
MAX_SCHEMA_RESTARTS = 10  # per flow and run: a schema that keeps changing is not a restart loop


class PipelineRun:
    """The running queries of one pipeline.

    Args:
        context: The session, spec and storage layout to run with.
        graph: The loaded definitions.
        trigger: When flows run.
        on_batch: Called (on the caller's thread) for every micro-batch that read rows.
        plan: What to run and what to rebuild (default: run everything).
        flow_triggers: Per-flow triggers overriding ``trigger``.
        on_message: Told about longer steps (full refreshes).

    """

    def __init__(self, context: PipelineContext, graph: PipelineGraph, trigger: Trigger,
                 on_batch: ProgressCallback | None = None, plan: RunPlan | None = None,
                 flow_triggers: Mapping[str, Trigger] | None = None,
                 on_message: MessageCallback | None = None) -> None:
        self.context = context
        self.spec = context.spec
        self.layout = context.layout
        self.graph = graph
        self.spark = context.spark
        self.trigger = trigger
        self.on_batch = on_batch
        self.plan = plan or RunPlan()
        self.flow_triggers = dict(flow_triggers or {})
        self.on_message = on_message or (lambda message: None)
        self.resolver = Resolver(graph, context)
        self.writers = FlowWriters(self.resolver, self.on_message)
        self.maintainer = Maintainer(self.resolver, self.on_message)
        # queries and finished are replaced, never changed in place: other threads (a caller's stop, a
        # benchmark polling for errors) iterate them while this run's thread starts flows.
        self.queries: dict[str, StreamingQuery] = {}  # a carried flow's is its carrier's
        self.carry = CarryPlan()
        self.pending: list[str] = []
        self.finished: dict[str, FlowOutcome] = {}
        self._flow_of_query: dict[str, str] = {}  # query id -> flow
        self._progress: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()  # from Spark's listener
        self._schema_restarts: dict[str, int] = {}
        self._ended: set[str] = set()  # flows whose query has ended and been looked at
        self._ends_logged: set[str] = set()  # flows whose end is in the event log
        self.event_log = EventLog(self.layout.event_log, self.spec.name, trigger=trigger.describe(),
                                  storage_options=self.layout.storage_options)
        self._wake = threading.Event()  # a query ended: look now rather than at the next poll
        self._listener = event_log_listener(self.event_log, self._progress.put, on_terminated=self._wake.set,
                                            refresh_of=self._view_refresh)
        self.leases = TableLeases(self.layout, self.spec.name, self.event_log.run_id,
                                  lease_ttl(self.spec.lease.ttl))

    def _view_refresh(self, flow: str, batch_id: int) -> dict[str, Any] | None:
        view = self.writers.views.get(flow)
        return view.take_refresh(batch_id) if view is not None else None

    # -- starting ---------------------------------------------------------------------------------------

    def start(self) -> None:
        """Hold the tables, finish rewinds, resolve, create tables, full-refresh, start the flows that can."""
        from deltaflow.commands.rewind import finish_rewinds

        self.spark.streams.addListener(self._listener)
        # One writing run per table: refused before anything is written.
        selected = self._selected()
        self.leases.acquire(selected)
        self.leases.start_renewing()  # now: resolving can take longer than a lease lasts on a busy machine
        finish_rewinds(self.spark, self.layout, self.on_message)
        stored = [d for d, spec in self.graph.datasets.items() if spec.stored]
        self.resolver.resolve(check_tables(self.layout, stored, self.on_message))
        finish_leaving(self.layout, self.graph)
        hold_declared_properties(self.resolver, selected, self.on_message)  # before any flow or refresh
        running = {n for n, d in self.graph.datasets.items() if d.runs}
        recorded = recorded_carriers(self.layout, self.graph, running)
        changes = DefinitionChanges.since_last_run(self.layout, self.graph, self.spec)
        refreshing = self._full_refresh_set(selected, changes.views(selected))  # changed views: rebuilt
        left = [u for u in leaving(self.resolver, self.layout, recorded, self.trigger_of, selected)
                if self.graph.flows[u].target not in refreshing]  # (a refreshed carrier starts anew anyway)
        self.leases.acquire({self.graph.flows[u].target for u in left})  # its checkpoint moves
        for carrier in left:  # each flow it wrote goes on alone from where it stands
            leave(self.layout, self.graph, carrier)
        join_caught_up(self.resolver, self.layout, selected, refreshing, self.trigger_of)  # (see carry_plan)
        self.carry = plan_carries(self.resolver, self.layout, selected, refreshing, self.trigger_of)
        self.event_log.carried = {u: tuple(ds) for u, ds in self.carry.carriers.items()}
        changes.record(self.layout, selected, refreshing, self.on_message)  # once the rebuilds are recorded
        for dataset in refreshing:  # one failing: its flows and their readers do not run
            self._end_now(holdback.refresh(self.writers, dataset, self.finished, self._upstream_flows))
        self.pending = [f.name for d in self.resolver.order() if d in selected
                        for f in self.graph.flows_into(d) if f.name not in self.finished]
        self._start_ready(threading.Event())

    def trigger_of(self, flow: str) -> Trigger:
        """The trigger ``flow`` runs with."""
        return self.flow_triggers.get(flow, self.trigger)

    def _selected(self) -> set[str]:
        running = {n for n, d in self.graph.datasets.items() if d.runs}
        return running if self.plan.refresh is None else set(self.plan.refresh) & running

    def _full_refresh_set(self, selected: set[str], extra: set[str]) -> list[str]:
        """The datasets to rebuild, upstream first, each with its refresh recorded before any work.

        Also rebuilt, with all downstream: ``extra``, a refresh left unfinished, an incremental view's
        outdated state.
        """
        names = set(self.graph.datasets) if self.plan.full_refresh_all else set(self.plan.full_refresh)
        names |= extra
        names |= {d for d in selected
                  if FullRefresh(self.layout, d).pending() is not None or outdated(self.resolver, d)}
        ordered = [d for d in self.resolver.order()
                   if d in self.resolver.downstream(names) and self.graph.datasets[d].runs]
        for dataset in ordered:
            refresh = FullRefresh(self.layout, dataset)
            if refresh.pending() is None or refresh.staging_lost(self.resolver.kinds[dataset]):
                refresh.request({f.name: self.layout.current_generation(dataset, f.name) + 1
                                 for f in self.graph.flows_into(dataset)})
        return ordered

    def _start_ready(self, stop: threading.Event) -> None:
        for name in list(self.pending):
            if stop.is_set():
                return
            if name in self.carry.carried:  # started with its carrier
                if name in self.queries or name in self.finished:
                    self.pending.remove(name)
                continue
            upstream = self._upstream_flows(name)
            if all(self._settled(u, mode) for u, mode in upstream):
                self.pending.remove(name)
                flow = self.graph.flows[name]
                held = holdback.failed_upstream((u for u, _ in upstream), self.finished, self.queries)
                if held is None:
                    self._start(flow)
                else:  # rule 13: never run on partial input (what it carries reads only its table)
                    flows = [flow, *(self.graph.flows[d] for d in self.carry.carriers.get(name, ()))]
                    self._end_now({f.name: holdback.skipped(f.name, str(f.location), held) for f in flows})

    def _end_now(self, outcomes: Mapping[str, FlowOutcome]) -> None:
        """Flows that do not run in this run, logged at once (for `status` and `ui`)."""
        self.finished = {**self.finished, **outcomes}
        for outcome in outcomes.values():
            self._log_end(outcome)

    def _upstream_flows(self, flow: str) -> list[tuple[str, ReadMode]]:
        stored = self.resolver.flow_stored_inputs(flow)
        return [(f.name, mode) for d, mode in stored.items() for f in self.graph.flows_into(d)]

    def _settled(self, flow: str, mode: ReadMode) -> bool:
        """Whether a flow reading ``flow``'s output (as ``mode``) may start.

        Yes once ``flow`` has finished (its ended query looked at: restarted? failed?). A continuous ``flow``
        is read as a stream at once; read as a batch (a dimension in a stream-static join) only after its
        first trigger, so the reader's first batch does not join against a table that is still being filled.
        """
        if flow in self.pending:
            return False
        query = self.queries.get(flow)
        if query is None:
            return True
        if not query.isActive:  # (a carried flow's query is its carrier's)
            return self._flow_of_query.get(str(query.id), flow) in self._ended
        if self.trigger_of(flow).stops_by_itself:
            return False
        return mode == "stream" or query.lastProgress is not None

    def _start(self, flow: Flow) -> None:
        try:
            if self.resolver.kinds[flow.target] != "materialized_view":
                # Built again now: the tables it reads may have gained columns since the graph was resolved
                # (an upstream flow of this run evolved them), and a stream keeps the schema it was built on.
                self.resolver.rebuild_flow(flow.name)
            carried = [self.graph.flows[d] for d in self.carry.carriers.get(flow.name, ())]
            trigger, carries = self.trigger_of(flow.name), flow.name in self.carry.carriers
            with scheduler_pool(self.spark, flow_depths(self.resolver)[flow.name]):
                query = (self.writers.start_carrier(flow, carried, trigger) if carries
                         else self.writers.start(flow, trigger))
        except Exception as exc:
            failed = {f.name: FlowOutcome(f.name, str(f.location), "failed", first_line(exc))
                      for f in (flow, *carried)}
            self.finished = {**self.finished, **failed}
            return
        if query is None:
            if (view := self.writers.views.get(flow.name)) and view.standalone:  # refreshed outside a query
                event = refresh_event(self.spec.name, self.event_log.run_id, flow.name, view.standalone)
                self.event_log.add(event)
                if self.on_batch is not None:
                    self.on_batch(BatchProgress.of_refresh(event.flow, event.duration_ms, view.standalone))
            outcome = FlowOutcome(flow.name, str(flow.location), "completed")
            self.finished = {**self.finished, flow.name: outcome}
        else:
            self.queries = {**self.queries, **{f.name: query for f in (flow, *carried)}}
            self._flow_of_query[str(query.id)] = flow.name

    # -- watching ---------------------------------------------------------------------------------------

    def poll_progress(self) -> None:
        """Report the micro-batches Spark's listener has posted since the last call.

        The listener, not the queries, is asked: ``recentProgress`` hands over up to 100 progress reports
        per query and call, which a poll several times a second turns into steady work for the driver.
        """
        while True:
            try:
                progress = self._progress.get_nowait()
            except queue.Empty:
                return
            flow = self._flow_of_query.get(str(progress["id"]))
            if flow is None or not (progress.get("numInputRows") or progress.get(REFRESH_KEY)):
                continue  # a full refresh's query, or a trigger that found nothing new (a view may refresh)
            carried = self.carry.carriers.get(flow, [])
            for name in (flow, *carried):
                self.maintainer.written(self.graph.flows[name].target)
                if self.on_batch is not None:
                    self.on_batch(BatchProgress.of(name, progress, shared=bool(carried)))

    def wait(self, stop: threading.Event, grace_seconds: float = 120.0) -> list[FlowOutcome]:
        """Watch the flows until all have ended or ``stop`` is set, then stop them between batches.

        Raises:
            LeaseError: Another run took this run's tables.
            StorageError: The event log could not be written for ``event_log.PATIENCE_SECONDS``.

        """
        unlogged: str | None = None
        while True:
            self.poll_progress()
            self._restart_after_schema_changes(stop)
            self._start_ready(stop)
            self.maintainer.tick()
            if self.leases.lost:  # another run writes these tables now: stop at once, not between batches
                self.stop(grace_seconds=0)
                stop.set()
            carried = self.carry.carried  # a query that ended after the restart pass looked: not over yet
            if not (self.pending or any(n not in self._ended for n in self.queries if n not in carried)):
                break
            self._wake.wait(POLL_SECONDS)
            self._wake.clear()
            unlogged = self.event_log.failing  # read once: it may clear itself
            if self.leases.lost or unlogged or stop.is_set():
                self.stop(grace_seconds)
                break
        self.maintainer.close(cancel=stop.is_set())
        outcomes = self.outcomes(stopped=stop.is_set() or bool(unlogged))
        self._close_event_log(outcomes)
        self.poll_progress()  # the last batches, which the event log has waited for
        self.leases.release()
        if self.leases.lost:
            raise LeaseError(self.leases.lost, hint=self.leases.lost_hint)
        if unlogged:
            raise StorageError(unlogged, hint="this run stopped between batches; start it again once the "
                               "storage answers")
        return outcomes

    def _restart_after_schema_changes(self, stop: threading.Event) -> None:
        """Restart each flow Delta stopped because a table it streams changed schema, built on the new one.

        Delta's source stops a stream at a schema change and asks for a restart. The restarted flow then
        meets the schema checks of its own table: a new column is taken with ``merge_schema``, anything else
        stops the flow with a named error.
        """
        for name, query in list(self.queries.items()):
            if (stop.is_set() or name in self._ended or query.isActive or name in self.carry.carried
                    or self.queries.get(name) is not query):
                continue  # (a carried flow ends, and starts again, with its carrier)
            self._ended.add(name)  # asked about once: an ended query stays ended
            error = query.exception()
            if (error is not None and "DELTA_SCHEMA_CHANGED" in str(error)
                    and self._schema_restarts.get(name, 0) < MAX_SCHEMA_RESTARTS):
                self._schema_restarts[name] = self._schema_restarts.get(name, 0) + 1
                self.on_message(f"{name}: a table it reads changed schema; restarting it on the new one")
                self.queries = {n: q for n, q in self.queries.items() if n != name}
                self._ended.discard(name)
                self._start(self.graph.flows[name])
            elif error is not None and self.carry.carriers.get(name):
                self._go_on_alone(name, error)
            elif error is not None:  # logged now, so that `status` and `ui` show it while the others run
                self._log_end(FlowOutcome(name, str(self.graph.flows[name].location), "failed",
                                          first_line(error)))

    def _go_on_alone(self, carrier: str, error: BaseException) -> None:
        """A carrier's query failed: the flows it carried fail, and it starts again without them.

        So a failing flow stops alone, as any other; the next run starts it where its table stands.
        """
        carried = self.carry.carriers.pop(carrier)
        self.event_log.carried.pop(carrier, None)
        for name in carried:
            flow = self.graph.flows[name]
            why = f"written with '{carrier}', which goes on alone; the next run goes on from there"
            outcome = FlowOutcome(name, str(flow.location), "failed", f"{first_line(error)} ({why})")
            self.finished = {**self.finished, name: outcome}
            self._log_end(outcome)
        self.on_message(f"{carrier}: failed while writing {', '.join(carried)} too; going on alone")
        leave(self.layout, self.graph, carrier)
        self.queries = {n: q for n, q in self.queries.items() if n not in (carrier, *carried)}
        self._ended.discard(carrier)
        self._start(self.graph.flows[carrier])

    def _log_end(self, outcome: FlowOutcome) -> None:
        if outcome.flow not in self._ends_logged:
            self._ends_logged.add(outcome.flow)
            self.event_log.add(end_event(self.spec.name, self.event_log.run_id, outcome.flow, outcome.state,
                                         outcome.error))

    def _close_event_log(self, outcomes: list[FlowOutcome]) -> None:
        """Log how each flow ended, once the listener has logged every batch of the run."""
        # Only batches that ran are posted to the listener: a trigger that found nothing new still shows
        # in a query's progress (without an addBatch), but no event for it ever comes.
        ran = {str(q.id): [p.batchId for p in q.recentProgress if "addBatch" in p.durationMs]
               for q in self.queries.values()}
        self.event_log.await_batches({query: max(ids) for query, ids in ran.items() if ids})
        self.spark.streams.removeListener(self._listener)
        for outcome in outcomes:
            self._log_end(outcome)
        if (warning := self.event_log.close()) is not None:
            self.on_message(warning)

    def stop(self, grace_seconds: float = 120.0) -> None:
        """Stop every query between batches (see :func:`~deltaflow.runtime.stopping.stop_between_batches`)."""
        stop_between_batches(self.queries, grace_seconds)

    def outcomes(self, stopped: bool) -> list[FlowOutcome]:
        """The state each flow ended in, in definition order (see :func:`~.holdback.run_outcomes`)."""
        return holdback.run_outcomes(self.graph, self.finished, self.queries, self.pending, stopped)

    def abort(self) -> None:
        """Stop whatever started, after a failure to start the run."""
        self.stop()
        self.maintainer.close(cancel=True)
        self._close_event_log([])
        self.leases.release()

    def finish(self, stop: threading.Event) -> list[FlowOutcome]:
        """Wait (see :meth:`wait`), and raise :class:`FlowError` naming every failed and skipped flow."""
        outcomes = self.wait(stop)
        if (error := holdback.run_failure(outcomes)) is not None:
            raise error
        return outcomes

