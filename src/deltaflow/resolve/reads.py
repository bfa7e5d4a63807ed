"""The rules of a read of a pipeline dataset: the Delta options it may pass, and what a dry run reads.

Spark ignores a misspelt source option silently; deltaflow knows Delta's options and names the one that
is not among them, at the line of the read.

Examples:
    >>> check_options({"maxFilesPerTrigger": 1}, DELTA_STREAM_OPTIONS, "bronze", "defs.py:3")
    >>> check_options({"maxFilesPerTriger": 1}, DELTA_STREAM_OPTIONS, "bronze", "defs.py:3")
    Traceback (most recent call last):
    ...
    deltaflow.errors.GraphError: DF-GRAPH defs.py:3: unknown Delta source option 'maxFilesPerTriger' ...

"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from deltaflow.define.graph import suggest
from deltaflow.errors import GraphError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

ReadMode = Literal["stream", "batch"]

#: Delta streaming source options deltaflow passes through (Spark ignores misspelt options silently).
DELTA_STREAM_OPTIONS = (
    "maxFilesPerTrigger", "maxBytesPerTrigger", "startingVersion", "startingTimestamp", "skipChangeCommits",
    "ignoreDeletes", "ignoreChanges", "withEventTimeOrder", "readChangeFeed", "excludeRegex",
    "failOnDataLoss", "schemaTrackingLocation", "allowSourceColumnRenameAndDrop",
)
DELTA_BATCH_OPTIONS = ("versionAsOf", "timestampAsOf", "readChangeFeed", "startingVersion",
                       "endingVersion", "startingTimestamp", "endingTimestamp")
#: The table property that makes Delta record a table's Change Data Feed, and the columns a read of it adds.
CHANGE_FEED = "delta.enableChangeDataFeed"
CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def check_options(options: Mapping[str, Any], known: tuple[str, ...], name: str, where: str) -> None:
    """Every key of ``options`` is one of ``known`` (case-insensitively).

    Raises:
        GraphError: Naming the unknown option, the dataset read and the line of the read.

    """
    lower = {k.lower() for k in known}
    for key in options:
        if key.lower() not in lower:
            raise GraphError(f"unknown Delta source option '{key}' reading '{name}'{suggest(key, known)}",
                             location=where, hint="options: " + ", ".join(known))


def reads_changes(options: Mapping[str, Any]) -> bool:
    """Whether a read with ``options`` reads the Change Data Feed."""
    return str(options.get("readChangeFeed", "false")).lower() == "true"


def placeholder(spark: Any, schema: StructType, streaming: bool) -> DataFrame:
    """An empty DataFrame with ``schema``: what a read analyses against in a dry run."""
    if not streaming:
        return spark.createDataFrame([], schema)  # type: ignore[no-any-return]
    from pyspark.sql import functions as F

    rate = spark.readStream.format("rate").load()
    return rate.select([F.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields])  # type: ignore[no-any-return]


def with_change_columns(schema: StructType) -> StructType:
    """``schema`` and the columns a change-feed read adds."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

    return StructType([*schema.fields, StructField("_change_type", StringType()),
                       StructField("_commit_version", LongType()),
                       StructField("_commit_timestamp", TimestampType())])
