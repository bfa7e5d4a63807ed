"""What an auto CDC flow's target holds: its columns, its schema, and how long its tombstones are kept.

Checked when the graph is resolved (the target's schema, before any query starts) and used by the
flow's writer (:mod:`deltaflow.sinks.cdc`).

Examples:
    >>> target_schema(flow, events.schema).names  # doctest: +SKIP
    ['id', 'name', 'city', 'balance', 'seq']

"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from deltaflow.errors import ConfigError, GraphError
from deltaflow.sinks.tombstones import SEQUENCE

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

    from deltaflow.define.graph import AutoCdc, Flow

START_AT, END_AT = "__START_AT", "__END_AT"
# The columns the writer gives each event: its sequence (when not a column of its own), its kind, and its
# rank among events at one sequence (a delete outranks an upsert).
SEQ, OP, RANK = SEQUENCE, "_df_op", "_df_rank"
UPSERT, DELETE, TRUNCATE = "upsert", "delete", "truncate"
TOMBSTONE_RETENTION = "pipelines.cdc.tombstoneGCThresholdInSeconds"
DEFAULT_TOMBSTONE_SECONDS = 2 * 24 * 3600


def sequence_of(cdc: AutoCdc, alias: str) -> str:
    """A row's sequence as SQL, ``alias`` naming its table: the column, or a struct of the columns.

    Examples:
        >>> sequence_of(cdc, "t")  # doctest: +SKIP
        't.`seq`'

    """
    columns = [f"{alias}.`{c}`" for c in cdc.sequence_by]
    if len(columns) == 1:
        return columns[0]
    pairs = (f"'{c}', {a}" for c, a in zip(cdc.sequence_by, columns, strict=True))
    return "named_struct(" + ", ".join(pairs) + ")"


def tombstone_retention(flow: Flow, properties: Mapping[str, str]) -> int:
    """Seconds a tombstone is kept: the target's ``pipelines.cdc.tombstoneGCThresholdInSeconds``.

    Raises:
        ConfigError: The property is not a whole number of seconds.

    Examples:
        >>> tombstone_retention(flow, {TOMBSTONE_RETENTION: "3600"})  # doctest: +SKIP
        3600

    """
    value = properties.get(TOMBSTONE_RETENTION, str(DEFAULT_TOMBSTONE_SECONDS))
    if not value.strip().isdigit():
        raise ConfigError(f"table property {TOMBSTONE_RETENTION} of '{flow.target}' must be a whole number "
                          f"of seconds, not {value!r}", location=str(flow.location))
    return int(value)


def target_columns(flow: Flow, source: StructType) -> list[str]:
    """The source columns the target keeps, checked against ``source``.

    Raises:
        GraphError: A named column is missing from the source, or a key or sequence column is left out.

    """
    cdc = cdc_of(flow)
    names = source.names
    named = {"keys": cdc.keys, "sequence_by": cdc.sequence_by, "column_list": cdc.column_list or (),
             "except_column_list": cdc.except_column_list or (),
             "track_history_column_list": cdc.track_history_column_list or ()}
    for what, columns in named.items():
        for column in columns:
            if column not in names:
                raise GraphError(f"auto CDC flow '{flow.name}': {what} column '{column}' is not in the "
                                 f"source (columns: {', '.join(names)})", location=str(flow.location))
    kept = [c for c in (cdc.column_list or names) if c not in (cdc.except_column_list or ())]
    for what, columns in (("key", cdc.keys), ("sequence_by", cdc.sequence_by)):
        for column in columns:
            if column not in kept:
                raise GraphError(f"auto CDC flow '{flow.name}' leaves {what} column '{column}' out of the "
                                 "target; deltaflow keeps it to order late events",
                                 location=str(flow.location), hint="keep it in column_list")
    return kept


def target_schema(flow: Flow, source: StructType) -> StructType:
    """The target table's schema: the kept columns, and for SCD type 2 ``__START_AT`` / ``__END_AT``."""
    from pyspark.sql.types import StructField, StructType

    kept = target_columns(flow, source)
    fields = [source[c] for c in kept]
    if cdc_of(flow).scd_type == 2:
        sequence = sequence_type(flow, source)
        fields += [StructField(START_AT, sequence), StructField(END_AT, sequence)]
    return StructType(fields)


def cdc_of(flow: Flow) -> AutoCdc:
    """The flow's auto CDC settings."""
    assert flow.cdc is not None, f"{flow.name} is not an auto CDC flow"
    return flow.cdc


def sequence_type(flow: Flow, source: StructType) -> DataType:
    """The type of the flow's sequence: its column's, or a struct of its columns."""
    from pyspark.sql.types import StructType

    columns = cdc_of(flow).sequence_by
    if len(columns) == 1:
        return source[columns[0]].dataType
    return StructType([source[c] for c in columns])
