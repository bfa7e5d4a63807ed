"""Reading the pipeline's own datasets: ``dp.read_stream``, ``dp.read``, and ``spark.read[Stream].table``.

Inside a definition, ``spark.readStream.table("bronze_clicks")`` and ``spark.read.table("customers")``
resolve to the pipeline's Delta tables (and temporary views), exactly like ``dp.read_stream`` /
``dp.read``; options set with ``.option()`` pass through to Delta's source (``maxFilesPerTrigger``,
``maxBytesPerTrigger``, ``startingVersion``, ``startingTimestamp``, ``skipChangeCommits``,
``ignoreDeletes``, ``withEventTimeOrder`` ...). A name that is not a pipeline dataset but a table of the
Spark catalog is read from the catalog; anything else is an error naming the line of the read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from deltaflow.define.context import current, has_current
from deltaflow.errors import GraphError
from deltaflow.resolve.state import active_resolver, building

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def read_stream(name: str, **options: Any) -> DataFrame:
    """Read pipeline dataset ``name`` as a stream (each new commit of its Delta table, once).

    Args:
        name: A streaming table or streaming temporary view of the pipeline.
        **options: Delta streaming source options, e.g. ``maxFilesPerTrigger=100``.

    Examples:
        >>> @dp.table  # doctest: +SKIP
        ... def silver_clicks():
        ...     return dp.read_stream("bronze_clicks", maxBytesPerTrigger="1g").where("value IS NOT NULL")

    """
    return active_resolver().read(name, streaming=True, options=options)


def read(name: str, *, version: int | None = None, timestamp: str | None = None,
         **options: Any) -> DataFrame:
    """Read pipeline dataset ``name`` as a batch (its latest version when the query runs, or an earlier one).

    In a stream-static join each micro-batch reads the table's latest version, so updates to a dimension
    table show from the next batch on. ``version`` / ``timestamp`` read the table as it was then (Delta's
    time travel; ``deltaflow history`` lists the versions), as long as its files are kept
    (``delta.deletedFileRetentionDuration``).

    Args:
        name: Any stored dataset or batch temporary view of the pipeline.
        version: The table version to read (``versionAsOf``).
        timestamp: Read the table as of this time, e.g. ``"2026-11-20 08:00:00"`` (``timestampAsOf``).
        **options: Other Delta batch read options.

    Examples:
        >>> customers = dp.read("customers")  # doctest: +SKIP
        >>> before_the_bug = dp.read("raw_readings", timestamp="2026-11-20 08:00:00")  # doctest: +SKIP

    """
    if version is not None:
        options["versionAsOf"] = version
    if timestamp is not None:
        options["timestampAsOf"] = timestamp
    return active_resolver().read(name, streaming=False, options=options)


def read_changes(
    name: str, *, starting_version: int | None = None, starting_timestamp: str | None = None,
    ending_version: int | None = None, ending_timestamp: str | None = None, stream: bool = False,
    **options: Any,
) -> DataFrame:
    """Read the Change Data Feed of pipeline table ``name``: its row changes, as a batch or a stream.

    Each row has the table's columns and ``_change_type`` (``insert``, ``update_preimage``,
    ``update_postimage``, ``delete``), ``_commit_version`` and ``_commit_timestamp``. The table must record
    its changes: ``table_properties={"delta.enableChangeDataFeed": "true"}`` on the table, or under
    ``table_properties`` in ``deltaflow.yml`` for every table.

    Args:
        name: A streaming table or materialized view of the pipeline.
        starting_version: The first version to read (batch default: 0; stream default: the current
            snapshot as inserts, then every change).
        starting_timestamp: The first commit time to read, instead of a version.
        ending_version: The last version to read (batch only).
        ending_timestamp: The last commit time to read (batch only).
        stream: Read new changes as they are committed, each once.
        **options: More Delta source options (``maxFilesPerTrigger`` ...).

    Raises:
        GraphError: An ending bound on a stream, or a table without a change feed.

    Examples:
        >>> @dp.table  # doctest: +SKIP
        ... def customers_audit():
        ...     return dp.read_changes("customers", stream=True)

    """
    if stream and (ending_version is not None or ending_timestamp is not None):
        raise GraphError(f"a stream of the changes of '{name}' takes no ending_version/ending_timestamp",
                         hint="drop them, or read a batch with stream=False")
    bounds = {"startingVersion": starting_version, "startingTimestamp": starting_timestamp,
              "endingVersion": ending_version, "endingTimestamp": ending_timestamp}
    given = {k: str(v) for k, v in bounds.items() if v is not None}
    if not stream and "startingVersion" not in given and "startingTimestamp" not in given:
        given["startingVersion"] = "0"
    options = {**options, "readChangeFeed": "true", **given}
    return active_resolver().read(name, streaming=stream, options=options)


class PipelineReader:
    """``spark.read`` / ``spark.readStream`` in a definition: ``.table(name)`` finds pipeline datasets.

    Every other method is Spark's own; options set with ``.option()`` / ``.options()`` are remembered so
    they reach the pipeline dataset's Delta source.
    """

    def __init__(self, reader: Any, streaming: bool) -> None:
        self._reader = reader
        self._streaming = streaming
        self._options: dict[str, Any] = {}

    def option(self, key: str, value: Any) -> PipelineReader:
        """Set a source option (see :class:`pyspark.sql.DataFrameReader`)."""
        self._options[key] = value
        self._reader = self._reader.option(key, value)
        return self

    def options(self, **options: Any) -> PipelineReader:
        """Set several source options."""
        for key, value in options.items():
            self.option(key, value)
        return self

    def table(self, name: str) -> DataFrame:
        """Read a pipeline dataset, or else a table of the Spark catalog."""
        resolver = active_resolver()
        if name not in resolver.graph.datasets and current().spark.catalog.tableExists(name):
            return self._reader.table(name)  # type: ignore[no-any-return]
        return resolver.read(name, streaming=self._streaming, options=self._options)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._reader, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            if result is self._reader or type(result) is type(self._reader):
                self._reader = result
                return self
            return result

        return call


class LoadingConf:
    """``spark.conf`` while definition files load: the spec's ``configuration``, read-only."""

    def __init__(self, configuration: Mapping[str, str]) -> None:
        self.configuration = configuration

    def get(self, key: str, default: str | None = None) -> str | None:
        """``configuration[key]``, else ``default``.

        Raises:
            GraphError: Neither is there (with the keys it may have meant); a Spark setting the spec does
                not set has Spark's own value only once Spark runs: read it inside a dataset function.

        """
        if key in self.configuration:
            return self.configuration[key]
        if default is not None:
            return default
        from deltaflow.define.graph import suggest
        from deltaflow.define.registry import caller_location

        spark_setting = key.startswith("spark.")
        what = "read it inside a dataset function" if spark_setting else "set it under configuration"
        raise GraphError(f"spark.conf.get('{key}'): no such key in the spec's configuration"
                         f"{suggest(key, list(self.configuration))}", location=str(caller_location()),
                         hint=what)

    def set(self, key: str, value: str) -> None:
        """Refused: a definition file sets nothing while it loads."""
        from deltaflow.define.registry import caller_location

        raise GraphError(f"spark.conf.set('{key}', ...) while the definitions load: set it under "
                         "configuration in the spec", location=str(caller_location()),
                         hint="every flow runs in the pipeline's one session")


def _sql(query: str, args: Any = None, **kwargs: Any) -> DataFrame:
    if args is not None or kwargs:  # a parameterised query: Spark's own
        return current().spark.sql(query, args, **kwargs)
    from deltaflow.sources.sql import pipeline_sql

    return pipeline_sql(query)


class SparkProxy:
    """``spark`` as definition files see it: the active pipeline's SparkSession, looked up on use.

    ``spark.read`` and ``spark.readStream`` resolve ``.table(name)`` to the pipeline's datasets, and so do
    ``spark.table(name)`` and the tables of a ``spark.sql(query)`` run inside a dataset function. While the
    files load (no pipeline active, no Spark yet), ``spark.conf.get`` answers from ``configuration``, as
    SDP's module-level reads of its settings expect.
    """

    def __init__(self, configuration: Mapping[str, str] | None = None) -> None:
        self._configuration = dict(configuration or {})

    def __getattr__(self, name: str) -> Any:
        if name == "conf" and not has_current():
            return LoadingConf(self._configuration)
        spark = current().spark
        if name in ("read", "readStream"):
            return PipelineReader(getattr(spark, name), streaming=name == "readStream")
        if name == "table":
            return PipelineReader(spark.read, streaming=False).table
        if name == "sql" and building():
            return _sql
        return getattr(spark, name)

    def __repr__(self) -> str:
        return "<deltaflow spark: the active pipeline's SparkSession>"
