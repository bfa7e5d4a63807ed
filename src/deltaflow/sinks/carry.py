"""Carried flows: a flow run inside its upstream flow's query, both tables written from one micro-batch.

A streaming table read only by streams costs a hop: its flow commits, then the next flow's query notices
the commit, plans a batch over the new files, reads them back and writes its own table. When a flow *D*
reads nothing but the stream of one table, and that table's one flow *U* is a plain append, *U*'s query
can write both tables from one micro-batch: *D*'s query runs over *U*'s rows before they are written, and
each table gets its own rows in the same batch. Readers still see two Delta tables, and ``status`` and the
event log two flows.

How the one query writes two tables: its rows are the union of *U*'s rows and *D*'s, each branch in a
struct column of its own (``_df_0`` for *U*, ``_df_1``... for the carried flows) and null in the
others. Each branch reads *U*'s sources with offsets of its own in the checkpoint (Spark gives each side
of a union its own source), so *D* reads exactly what *U* reads, once, without waiting for *U*'s commit.
The batch is persisted once, and each table's rows appended from it, each write stamped with its own
flow's ``txnAppId`` and the batch id (:mod:`deltaflow.sinks.txn_append`): a batch replayed after a
crash between the two commits writes only what is missing.

A checkpoint keeps its sources for good, so a carrier whose carried flows change moves to a new generation
of its checkpoint holding its own sources' offsets alone
(:func:`deltaflow.runtime.checkpoints.copy_own_sources`), and each flow it carried goes on alone from the
version of *U*'s table after the last batch that wrote its own (:mod:`deltaflow.runtime.carry_plan`).

When: *D* reads only *U*'s table, as a stream, without options; *U* and *D* are the only writers of their
tables, plain appends (no auto CDC, no foreach-batch sink, no expectations, no schema evolution, no
declared schema on *U*'s table) with the same trigger; *D* keeps no state (which could not follow it out
of *U*'s query when a verb needs it alone); and both start fresh (no batch committed). A carried flow that
stops qualifying, or that a verb needs alone, goes on alone from where its table stands, nothing rebuilt.
:func:`carrier_of` says why a flow is not carried; ``deltaflow graph`` shows it.

Examples:
    >>> carrier_of(resolver, "silver_clicks")  # doctest: +SKIP
    ('bronze_clicks', None)

"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

from deltaflow.faults import crash_point
from deltaflow.sinks.read_rows import ROWS_METRIC
from deltaflow.sinks.txn_append import append_once

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from deltaflow.define.graph import BatchHandler
    from deltaflow.resolve.resolved import ResolvedGraph
    from deltaflow.storage import FlowCheckpoint, StorageLayout

_BRANCH = "_df_{}"


def carrier_of(graph: ResolvedGraph, flow: str) -> tuple[str | None, str | None]:
    """``(upstream flow, None)`` when ``flow`` can run inside that flow's query, else ``(None, why not)``."""
    from deltaflow.define.expectations import expectations_of

    resolved = graph.flows[flow]
    spec = resolved.flow
    if graph.kinds.get(spec.target) != "table" or spec.cdc is not None:
        return None, "not an append into a streaming table"
    if len(resolved.inputs) != 1 or resolved.sources or resolved.changes or resolved.pinned:
        return None, "it reads more than one table's stream"
    (table, mode), = resolved.inputs.items()
    if mode != "stream" or graph.kinds.get(table) != "table" or resolved.options.get(table):
        return None, f"it does not read '{table}' as a plain stream"
    upstream = graph.graph.flows_into(table)
    if len(upstream) != 1:
        return None, f"'{table}' has {len(upstream)} flows"
    carrier = graph.flows[upstream[0].name]
    for one in (carrier, resolved):
        dataset = graph.graph.datasets[one.flow.target]
        if one.flow.cdc is not None or dataset.handler is not None or dataset.merge_schema:
            return None, f"'{one.flow.name}' is not a plain append"
        if not one.streaming:
            return None, f"'{one.flow.name}' is not a stream"
        if one.quarantines or expectations_of(one.flow.func):
            return None, f"'{one.flow.name}' has expectations"
        if len(graph.graph.flows_into(one.flow.target)) != 1:
            return None, f"'{one.flow.target}' has more than one flow"
    if graph.graph.datasets[table].schema is not None:
        return None, f"'{table}' declares its schema"
    if (operator := stateful_operator(resolved.df)) is not None:
        return None, f"it keeps state ({operator}), which could not leave '{carrier.flow.name}''s query"
    return carrier.flow.name, None


#: Logical operators that keep state across micro-batches in a streaming query.
_STATEFUL = re.compile(r"^[\s:|+~-]*(Deduplicate|DeduplicateWithinWatermark|Distinct|Aggregate|Join|"
                       r"FlatMapGroupsWithState|FlatMapGroupsInPandasWithState|TransformWithState\w*|"
                       r"GlobalLimit|LocalLimit|Window)\b", re.MULTILINE)


def stateful_operator(df: DataFrame) -> str | None:
    """The first operator of ``df``'s plan that keeps state in a stream (None: it keeps none).

    A carried flow must keep none: its position can then leave its carrier's query at any batch boundary
    (the version of the upstream table the carrier last wrote), and the flow go on alone, nothing lost or
    twice; state kept in the carrier's checkpoint could not follow it.
    """
    match = _STATEFUL.search(str(df._jdf.queryExecution().analyzed().toString()))
    return match.group(1) if match else None


@dataclass(frozen=True)
class Branch:
    """One table a carrier's query writes: the flow, its checkpoint identity, its table."""

    flow: str
    checkpoint: FlowCheckpoint
    path: str
    partition_cols: tuple[str, ...] = ()


def carried_frame(frames: Sequence[DataFrame]) -> DataFrame:
    """One streaming DataFrame holding every branch's rows, branch ``i`` in column ``_df_i``."""
    from pyspark.sql import functions as F

    def part(index: int, df: DataFrame) -> DataFrame:
        columns = [F.struct(*[F.col(f"`{c}`") for c in df.columns]).alias(_BRANCH.format(index))
                   if i == index else F.lit(None).cast(other.schema).alias(_BRANCH.format(i))
                   for i, other in enumerate(frames)]
        return df.select(*columns)

    rows = reduce(lambda a, b: a.unionByName(b), [part(i, df) for i, df in enumerate(frames)])
    # the carrier's own branch: the rows its flow read (and kept), which is what each carried flow reads
    return rows.observe(ROWS_METRIC, F.count(F.col(_BRANCH.format(0))).alias("rows"))


def carrier_writer(layout: StorageLayout, branches: Sequence[Branch]) -> BatchHandler:
    """The batch handler of a carrier's query: each branch's rows appended to its table, each stamped.

    ``branches[0]`` is the carrier's own. The batch is read once, into memory, for all of them.
    """
    from pyspark.sql import functions as F

    app_ids: dict[str, str] = {}

    def write(batch: DataFrame, batch_id: int) -> None:
        if not app_ids:  # the query id is in the carrier's checkpoint once the query has started
            query_id = layout.query_id(branches[0].checkpoint)
            app_ids.update({b.flow: b.checkpoint.app_id(query_id) for b in branches})
        batch = batch.persist()
        try:
            for index, branch in enumerate(branches):
                column = _BRANCH.format(index)
                rows = batch.where(F.col(column).isNotNull()).select(f"{column}.*")
                append_once(rows, branch.path, app_id=app_ids[branch.flow], batch_id=batch_id,
                            partition_cols=branch.partition_cols)
                crash_point(f"carried:{branch.flow}")
        finally:
            batch.unpersist()

    return write


def carried_flows(layout: StorageLayout, carrier: FlowCheckpoint) -> list[str]:
    """The flows ``carrier``'s query writes besides its own (none: not a carrier's checkpoint)."""
    return list(carry_record(layout, carrier).get("flows", []))


def record_carry(layout: StorageLayout, carrier: FlowCheckpoint, carried: Sequence[FlowCheckpoint],
                 joined_at: Mapping[str, int] | None = None) -> None:
    """Write both sides' records before the carrier's query starts: who carries whom, in which generation.

    ``joined_at``: for flows that ran alone before they joined, the version of the carrier's table each
    had read up to (kept across later records of the same carrier).
    """
    record = {"dataset": carrier.dataset, "flow": carrier.flow, "generation": carrier.generation}
    for checkpoint in carried:
        layout.fs.write_text(checkpoint.carried_by, json.dumps(record))
    joined = dict(joined_at if joined_at is not None else carry_record(layout, carrier).get("joined_at", {}))
    flows = [c.flow for c in carried]
    layout.fs.write_text(carrier.carries, json.dumps({"flows": flows, "joined_at": joined}))


def carry_record(layout: StorageLayout, carrier: FlowCheckpoint) -> dict[str, Any]:
    """A carrier's record (``{}``: not a carrier's checkpoint): ``flows`` and ``joined_at``."""
    text = layout.fs.read_text(carrier.carries)
    return dict(json.loads(text)) if text is not None else {}
