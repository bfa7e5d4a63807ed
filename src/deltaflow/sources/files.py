"""A drop folder of files (JSON, CSV, text, Parquet...) as a streaming source.

Malformed JSON/CSV lines are never turned into silent nulls: they are kept whole in ``_corrupt_record``
(with every parsed column null), next to the file they came from, for quarantine downstream.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from deltaflow.define.context import current
from deltaflow.errors import SourceError
from deltaflow.resolve.state import note_source

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

CORRUPT_COLUMN = "_corrupt_record"
_TEXT_FORMATS = {"json", "csv"}


def read_files(
    path: str,
    *,
    format: str = "json",
    schema: StructType | str | None = None,
    max_files_per_trigger: int | None = None,
    **options: Any,
) -> DataFrame:
    """Stream the files that arrive in a folder; each file is read once.

    Args:
        path: The folder (relative paths are relative to ``deltaflow.yml``), or a URI.
        format: ``json`` (one object per line), ``csv``, ``text``, ``parquet``...
        schema: Required for ``json`` and ``csv``: a StructType or a DDL string
            (``"order_id STRING, amount DOUBLE"``).
        max_files_per_trigger: Upper bound of files per micro-batch.
        **options: Further options of Spark's file source for that format.

    Returns:
        A streaming DataFrame with the schema's columns, ``_corrupt_record`` (json/csv: the raw line when
        it did not parse, else null), ``source_file`` and ``ingested_at``.

    Examples:
        >>> @dp.table  # doctest: +SKIP
        ... def bronze_orders():
        ...     return dp.read_files("landing/orders", schema="order_id STRING, amount DOUBLE")

    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    ctx = current()
    location = path if "://" in path else str((ctx.spec.root / path).resolve())
    if "://" not in path and not Path(location).is_dir():
        raise SourceError("drop folder does not exist", location=location,
                          hint="create it, or fix the path given to dp.read_files")
    reader = ctx.spark.readStream.format(format)
    if format in _TEXT_FORMATS:
        if schema is None:
            raise SourceError(f"dp.read_files needs a schema for format '{format}'", location=location)
        struct = schema if isinstance(schema, StructType) else cast(StructType, StructType.fromDDL(schema))
        if CORRUPT_COLUMN not in struct.fieldNames():
            struct = StructType([*struct.fields, StructField(CORRUPT_COLUMN, StringType())])
        reader = reader.schema(struct).option("mode", "PERMISSIVE").option(
            "columnNameOfCorruptRecord", CORRUPT_COLUMN)
    elif schema is not None:
        reader = reader.schema(schema)
    if max_files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", str(max_files_per_trigger))
    for key, value in options.items():
        reader = reader.option(key, str(value))
    note_source(f"files:{path}")
    return reader.load(location).select(
        "*", F.col("_metadata.file_path").alias("source_file"), F.current_timestamp().alias("ingested_at"))
