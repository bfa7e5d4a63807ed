"""The one entry to the sinks: given a resolved flow, start the writer its target needs.

=======================================  ==============================================================
the flow's target                         the writer
=======================================  ==============================================================
a materialized view                       :class:`~deltaflow.sinks.materialize.MaterializedView` (full or
                                          by-window refresh, one idempotent overwrite per batch)
a streaming table fed by auto CDC         :class:`~deltaflow.sinks.cdc.AutoCdcWriter` (one MERGE per batch)
a foreach-batch sink                      the user's function
a streaming table, with quarantine        :func:`~deltaflow.sinks.quarantine.split_writer` (table and
                                          ``<table>_quarantine`` in one idempotent batch)
a streaming table                         :func:`~deltaflow.sinks.append.start_append` (one commit per batch)
a streaming table carrying other flows    :func:`~deltaflow.sinks.carry.carrier_writer` (one query;
                                          each table's rows appended, stamped by its own flow)
=======================================  ==============================================================

Every foreach-batch writer runs inside :func:`~deltaflow.sinks.foreach_batch.start_foreach_batch`, so
each of its Delta writes carries the flow's ``txnAppId`` / ``txnVersion`` (but for auto CDC's tombstones,
which a replay may write twice unseen: see :mod:`deltaflow.sinks.cdc`).

Examples:
    >>> writers = FlowWriters(resolver)  # doctest: +SKIP
    >>> query = writers.start(graph.flows["silver_clicks"], Trigger("available_now"))  # doctest: +SKIP

"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from deltaflow.define.expectations import table_schema
from deltaflow.runtime.checkpoint_repair import repair_checkpoint
from deltaflow.runtime.checkpoints import clear_interrupted_writes
from deltaflow.sinks.append import start_append
from deltaflow.sinks.carry import Branch, carried_frame, carrier_writer, record_carry
from deltaflow.sinks.cdc import AutoCdcWriter
from deltaflow.sinks.cdc_target import tombstone_retention
from deltaflow.sinks.foreach_batch import start_foreach_batch
from deltaflow.sinks.materialize import MaterializedView
from deltaflow.sinks.quarantine import split_writer
from deltaflow.sinks.state_store import state_store
from deltaflow.sinks.tables import check_schema, ensure_quarantine

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

    from deltaflow.define.graph import BatchHandler, Flow
    from deltaflow.resolve.resolver import Resolver
    from deltaflow.runtime.triggers import Trigger
    from deltaflow.storage import FlowCheckpoint


class FlowWriters:
    """Starts each flow's writer; keeps the materialized views' (a full refresh asks them again).

    Args:
        resolver: The resolved pipeline (its context holds the session and the storage layout).
        on_message: Told about each checkpoint repaired.

    """

    def __init__(self, resolver: Resolver, on_message: Callable[[str], None] | None = None) -> None:
        self.resolver = resolver
        self.on_message = on_message or (lambda message: None)
        self.layout = resolver.context.layout
        self.spark = resolver.context.spark
        self.views: dict[str, MaterializedView] = {}

    def checkpoint(self, flow: Flow, table: str | None) -> FlowCheckpoint:
        """The flow's current checkpoint, cleared of what a crash left half-written, repaired if safe.

        Args:
            flow: The flow.
            table: The Delta table its batches write (None: a foreach-batch sink, writing who knows what).

        Raises:
            ConfigError: Damage that cannot be repaired safely (:mod:`deltaflow.runtime.checkpoint_repair`).

        """
        checkpoint = self.layout.checkpoint(flow.target, flow.name)
        clear_interrupted_writes(self.layout.fs, checkpoint)
        for repair in repair_checkpoint(self.layout, checkpoint, table):
            self.on_message(repair)
        return checkpoint

    def view(self, dataset: str) -> MaterializedView:
        """The refresh of materialized view ``dataset``."""
        if dataset not in self.views:
            flow = self.resolver.graph.flows[dataset]
            self.views[dataset] = MaterializedView(self.resolver, dataset,
                                                   self.checkpoint(flow, self.layout.table(dataset)))
        return self.views[dataset]

    def start_carrier(self, flow: Flow, carried: Sequence[Flow], trigger: Trigger) -> StreamingQuery:
        """Start ``flow``'s query writing the ``carried`` flows' tables too (:mod:`deltaflow.sinks.carry`)."""
        own = self.checkpoint(flow, self.layout.table(flow.target))
        upstream = self.resolver.flows[flow.name].df
        frames: list[DataFrame] = []
        branches: list[Branch] = []
        for one in (flow, *carried):
            dataset, path = self.resolver.graph.datasets[one.target], self.layout.table(one.target)
            df = upstream if one is flow else self.resolver.rebuild(one, stand_ins={flow.target: upstream})
            check_schema(self.spark, one, dataset, path, table_schema(df))
            checkpoint = own if one is flow else self.layout.checkpoint(one.target, one.name)
            frames.append(df)
            branches.append(Branch(one.name, checkpoint, path, dataset.partition_cols))
        record_carry(self.layout, own, [b.checkpoint for b in branches[1:]])
        handler = carrier_writer(self.layout, branches)
        with state_store(self.spark):
            return start_foreach_batch(carried_frame(frames), name=flow.name, layout=self.layout,
                                       handler=handler, checkpoint=own, trigger=trigger)

    def start(self, flow: Flow, trigger: Trigger, into: str | None = None) -> StreamingQuery | None:
        """Start ``flow``'s query; None when it had nothing to run (a view without pipeline inputs).

        A streaming table's flow keeps its state, if any, in RocksDB
        (:func:`~deltaflow.sinks.state_store.state_store`), and so does an incremental view with a
        lateness (its state is each recent window's distinct values); other views keep Spark's default.

        Args:
            flow: The flow.
            trigger: When it runs.
            into: The table to write instead of the target's own (a full refresh's staging table).

        """
        if self.resolver.kinds[flow.target] == "materialized_view":
            view = self.view(flow.target)
            if view.incremental is None or view.incremental.plan.lateness is None:
                return view.start(trigger)
            with state_store(self.spark, empty_batches=False):  # update mode: dropping state changes no row
                return view.start(trigger)
        with state_store(self.spark):
            return self._start(flow, trigger, into)

    def _start(self, flow: Flow, trigger: Trigger, into: str | None) -> StreamingQuery | None:
        resolved = self.resolver.flows[flow.name]
        df, target = resolved.df, self.resolver.graph.datasets[flow.target]
        path = into or self.layout.table(flow.target)
        checkpoint = self.checkpoint(flow, None if target.handler is not None else path)

        def each_batch(handler: BatchHandler) -> StreamingQuery:
            return start_foreach_batch(df, name=flow.name, handler=handler, layout=self.layout,
                                       checkpoint=checkpoint, trigger=trigger)

        if flow.cdc is not None:
            retention = tombstone_retention(flow, self.resolver.table_properties(flow.target))
            writer = AutoCdcWriter(flow, path, checkpoint.tombstones, retention, self.layout.storage_options)
            writer.prepare(self.spark, df.schema)
            return each_batch(writer.apply)
        if target.handler is not None:
            return each_batch(target.handler)
        check_schema(self.spark, flow, target, path, table_schema(df),
                     sole_writer=len(self.resolver.graph.flows_into(flow.target)) == 1)
        if resolved.quarantines:  # the table and its quarantine, in one idempotent batch
            quarantine = self.layout.quarantine(flow.target)
            ensure_quarantine(self.spark, quarantine)
            return each_batch(split_writer(flow.name, path, quarantine, target.partition_cols,
                                           target.merge_schema))
        return start_append(df, name=flow.name, path=path, trigger=trigger, layout=self.layout,
                            checkpoint=checkpoint, partition_cols=target.partition_cols,
                            merge_schema=target.merge_schema)
