"""The auto CDC declaration: ``dp.create_auto_cdc_flow`` and the checks of its arguments.

The name mirrors Apache Spark Declarative Pipelines (``pyspark.pipelines``); like the rest of
:mod:`deltaflow.define.datasets` it only registers a flow into the graph being loaded. Nothing here touches
Spark.

Examples:
    >>> dp.create_streaming_table("customers")  # doctest: +SKIP
    >>> dp.create_auto_cdc_flow(  # doctest: +SKIP
    ...     target="customers", source="customer_events", keys=["customer_id"], sequence_by="ts")

"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from deltaflow.define.graph import AutoCdc, Flow, SourceLocation
from deltaflow.define.registry import active_graph, caller_location
from deltaflow.errors import GraphError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def create_auto_cdc_flow(
    target: str, source: str, keys: list[str], sequence_by: str | Column | list[str], *,
    apply_as_deletes: str | Column | None = None, apply_as_truncates: str | Column | None = None,
    column_list: list[str] | None = None, except_column_list: list[str] | None = None,
    stored_as_scd_type: int | str = 1, track_history_column_list: list[str] | None = None,
    ignore_null_updates: bool = False, name: str | None = None,
) -> None:
    """Upsert the change events of streaming dataset ``source`` into streaming table ``target``, exactly once.

    Each micro-batch is applied in one Delta MERGE: the latest event per key (by ``sequence_by``) wins, an
    event older than the target's row never overwrites it, and a delete leaves a tombstone so that a late
    insert of the same or an older sequence does not bring the row back (kept for the target's table
    property ``pipelines.cdc.tombstoneGCThresholdInSeconds``, default two days). A batch replayed after a
    crash changes nothing: every write carries the flow's checkpoint identity and the batch id.

    With ``stored_as_scd_type=2`` the target keeps every version of each row, with ``__START_AT`` and
    ``__END_AT`` (the ``sequence_by`` values bounding it); an out-of-order event lands at its place in
    history and a delete closes the current version.

    Args:
        target: A streaming table declared with :func:`~deltaflow.define.datasets.create_streaming_table`.
        source: The streaming table or view of change events.
        keys: The columns identifying a row.
        sequence_by: The column (or columns, compared in order) giving the events' order.
        apply_as_deletes: A condition (SQL string or Column) marking an event as a delete.
        apply_as_truncates: A condition marking an event as a truncate of the whole table (SCD type 1).
        column_list: The source columns to keep in the target (default: all).
        except_column_list: The source columns to leave out of the target.
        stored_as_scd_type: 1 (keep the latest row) or 2 (keep history).
        track_history_column_list: SCD type 2: the columns whose change starts a new version; changes to
            the others update the current version in place (default: every event is a new version).
        ignore_null_updates: A null in an update keeps the target's value instead of writing null.
        name: The flow's name (default: the target's).

    Examples:
        >>> dp.create_streaming_table("customers")  # doctest: +SKIP
        >>> dp.create_auto_cdc_flow(  # doctest: +SKIP
        ...     target="customers", source="customer_events", keys=["customer_id"], sequence_by="ts",
        ...     apply_as_deletes="op = 'DELETE'", except_column_list=["op"])

    """
    add_auto_cdc_flow(caller_location(), target, source, keys, sequence_by, apply_as_deletes=apply_as_deletes,
                      apply_as_truncates=apply_as_truncates, column_list=column_list,
                      except_column_list=except_column_list, stored_as_scd_type=stored_as_scd_type,
                      track_history_column_list=track_history_column_list,
                      ignore_null_updates=ignore_null_updates, name=name)


def add_auto_cdc_flow(
    where: SourceLocation, target: str, source: str, keys: list[str],
    sequence_by: str | Column | list[str], *,
    apply_as_deletes: str | Column | None = None, apply_as_truncates: str | Column | None = None,
    column_list: list[str] | None = None, except_column_list: list[str] | None = None,
    stored_as_scd_type: int | str = 1, track_history_column_list: list[str] | None = None,
    ignore_null_updates: bool = False, name: str | None = None,
) -> None:
    """:func:`create_auto_cdc_flow` called at ``where`` (for a front end of its own: SDP's function)."""
    graph = active_graph("dp.create_auto_cdc_flow")
    scd_type = int(stored_as_scd_type) if str(stored_as_scd_type) in ("1", "2") else 0
    if scd_type not in (1, 2):
        raise GraphError(f"stored_as_scd_type must be 1 or 2, not {stored_as_scd_type!r}",
                         location=str(where))
    if scd_type == 2 and apply_as_truncates is not None:
        raise GraphError("apply_as_truncates works with stored_as_scd_type=1 only", location=str(where))
    if not keys:
        raise GraphError("create_auto_cdc_flow needs keys=[...]", location=str(where))
    cdc = AutoCdc(
        keys=tuple(keys), sequence_by=_column_names(sequence_by, "sequence_by", where),
        apply_as_deletes=apply_as_deletes, apply_as_truncates=apply_as_truncates,
        column_list=tuple(column_list) if column_list is not None else None,
        except_column_list=tuple(except_column_list) if except_column_list is not None else None,
        scd_type=2 if scd_type == 2 else 1,
        track_history_column_list=(tuple(track_history_column_list)
                                   if track_history_column_list is not None else None),
        ignore_null_updates=ignore_null_updates,
    )

    graph.add_flow(cdc_flow(name or target, target, source, cdc, where))


def cdc_flow(name: str, target: str, source: str, cdc: AutoCdc, where: SourceLocation) -> Flow:
    """The auto CDC flow ``name`` into ``target``, streaming ``source``'s change events (every front end's).

    Examples:
        >>> cdc_flow("customers", "customers", "changes", AutoCdc(keys=("id",), sequence_by=("ts",)),
        ...          where).cdc.keys  # doctest: +SKIP
        ('id',)

    """
    def read_source() -> DataFrame:
        from deltaflow.sources.delta import read_stream

        return read_stream(source)

    return Flow(name=name, target=target, func=read_source, location=where, cdc=cdc)


def _column_names(value: str | Column | list[str], what: str, where: SourceLocation) -> tuple[str, ...]:
    """Column names from a name, a list of names, or a plain column reference such as ``F.col("ts")``."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    match = re.fullmatch(r"Column<'([A-Za-z_][\w.]*)'>", repr(value))
    if match:
        return (match.group(1),)
    raise GraphError(f"{what} must name columns (a name, a list of names or F.col('name')), not {value!r}",
                     location=str(where))
