"""``dp.parse_json``: JSON text into typed columns, with every record that does not fit quarantined.

Spark's ``from_json`` turns what it cannot read into nulls. ``parse_json`` parses each record twice, into
the declared schema and into a plain map of its fields, and compares them. Each record that does not fit
gets a reason, and the flow sends it to ``<table>_quarantine`` with that reason and the raw text (see
:mod:`deltaflow.sinks.quarantine`) instead of writing nulls into the table:

=====================  ===========================================================================
reason                 the record
=====================  ===========================================================================
``not_utf8``           arrived as bytes that are not UTF-8 (Kafka ``value_bytes`` is set)
``empty_record``       is null (a Kafka tombstone), empty or only whitespace
``oversize``           is longer than ``max_bytes``
``malformed_json``     is not a JSON object
``missing_field:f``    has no value for required field ``f``
``wrong_type:f``       has a value for ``f`` that does not convert to its declared type
``bad_timestamp:f``    has a value for timestamp/date field ``f`` that does not parse
=====================  ===========================================================================

Examples:
    >>> @dp.table  # doctest: +SKIP
    ... def silver_clicks():
    ...     return dp.parse_json(spark.readStream.table("bronze_clicks"), CLICK_SCHEMA,
    ...                          required=["event_id", "user_id"], keep=["topic", "partition", "offset"])

"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from deltaflow.define.expectations import FAILED, RAW, RAW_BYTES
from deltaflow.errors import GraphError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

#: Records longer than this (in bytes) are quarantined as ``oversize`` unless ``max_bytes`` says otherwise.
MAX_BYTES = 1_000_000


def parse_json(
    df: DataFrame, schema: StructType | str, *, column: str = "value", required: Sequence[str] = (),
    keep: Sequence[str] = ("topic", "partition", "offset", "timestamp", "source_file"),
    max_bytes: int = MAX_BYTES, bytes_column: str = "value_bytes",
) -> DataFrame:
    """The fields of the JSON records in ``df[column]`` as typed columns, each misfit quarantined.

    A record that does not fit the schema goes to quarantine with its reason (see the module docstring).

    Args:
        df: The DataFrame holding the JSON text (e.g. a bronze Kafka table read as a stream).
        schema: The records' schema (a ``StructType`` or DDL string).
        column: The column holding the JSON text.
        required: Fields every record must have (not null).
        keep: Columns of ``df`` to keep next to the parsed fields, when present (source positions).
        max_bytes: Longer records are quarantined as ``oversize``.
        bytes_column: A column holding the original bytes when they were not UTF-8 (the Kafka source's
            ``value_bytes``); records with it set are quarantined as ``not_utf8``.

    Raises:
        GraphError: ``column`` is not in ``df``, or a required field is not in the schema.

    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import DateType, StructType, TimestampNTZType, TimestampType

    if column not in df.columns:
        raise GraphError(f"parse_json: no column '{column}' to parse (columns: {', '.join(df.columns)})")
    struct = schema if isinstance(schema, StructType) else StructType.fromDDL(schema)
    if not isinstance(struct, StructType):
        raise GraphError(f"parse_json: the schema must be a struct of fields, not {schema!r}")
    for name in required:
        if name not in struct.names:
            raise GraphError(f"parse_json: required field '{name}' is not in the schema "
                             f"(fields: {', '.join(struct.names)})")
    kept = [F.col(c) for c in keep if c in df.columns and c not in struct.names]
    raw_bytes = [F.col(bytes_column).alias(RAW_BYTES)] if bytes_column in df.columns else []
    # Parse into the schema once; only a record with a null field is parsed again as a plain map (to tell
    # a missing field from a value of the wrong type), so well-formed records cost one parse.
    parsed = df.select(*kept, F.col(column).cast("string").alias(RAW), *raw_bytes,
                       F.from_json(F.col(column).cast("string"), struct).alias("_df_typed"))
    raw, typed = F.col(RAW), F.col("_df_typed")
    gaps = typed.isNull()
    for field in struct.fields:
        gaps = gaps | typed[field.name].isNull()
    parsed = parsed.withColumn("_df_fields", F.when(gaps, F.from_json(raw, "map<string,string>")))
    fields = F.col("_df_fields")

    def reason(condition: Column, text: str) -> Column:
        return F.when(condition, F.lit(text))

    reasons = []
    if raw_bytes:
        reasons.append(reason(F.col(RAW_BYTES).isNotNull(), "not_utf8"))
    empty = raw.isNull() | raw.rlike(r"^\s*$")
    reasons += [reason(empty, "empty_record"),
                reason(F.octet_length(raw) > max_bytes, "oversize"),
                reason(~empty & gaps & fields.isNull(), "malformed_json")]
    reasons += [reason(fields.isNotNull() & fields[name].isNull(), f"missing_field:{name}")
                for name in required]
    for field in struct.fields:
        kind = ("bad_timestamp" if isinstance(field.dataType, TimestampType | TimestampNTZType | DateType)
                else "wrong_type")
        reasons.append(reason(fields[field.name].isNotNull() & typed[field.name].isNull(),
                              f"{kind}:{field.name}"))
    names = [c for c in keep if c in df.columns and c not in struct.names]
    return parsed.select(*names, *[typed[f.name].alias(f.name) for f in struct.fields], RAW,
                         *([RAW_BYTES] if raw_bytes else []),
                         F.filter(F.array(*reasons), lambda r: r.isNotNull()).alias(FAILED))
