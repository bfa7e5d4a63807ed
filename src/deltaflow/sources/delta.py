"""Reading the pipeline's own datasets: ``dp.read_stream``, ``dp.read``, and ``spark.read[Stream].table``.

Inside a definition, ``spark.readStream.table("bronze_clicks")`` and ``spark.read.table("customers")``
resolve to the pipeline's Delta tables (and temporary views), exactly like ``dp.read_stream`` /
``dp.read``; options set with ``.option()`` pass through to Delta's source (``maxFilesPerTrigger``,
``maxBytesPerTrigger``, ``startingVersion``, ``startingTimestamp``, ``skipChangeCommits``,
``ignoreDeletes``, ``withEventTimeOrder`` ...). A name that is not a pipeline dataset but a table of the
Spark catalog is read from the catalog; anything else is an error naming the line of the read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deltaflow.context import current

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def read_stream(name: str, **options: Any) -> DataFrame:
    """Read pipeline dataset ``name`` as a stream (each new commit of its Delta table, once).

    Args:
        name: A streaming table or streaming temporary view of the pipeline.
        **options: Delta streaming source options, e.g. ``maxFilesPerTrigger=100``.

    Example:
        >>> @dp.table  # doctest: +SKIP
        ... def silver_clicks():
        ...     return dp.read_stream("bronze_clicks", maxBytesPerTrigger="1g").where("value IS NOT NULL")

    """
    from deltaflow.resolve import active_resolver

    return active_resolver().read(name, streaming=True, options=options)


def read(name: str, **options: Any) -> DataFrame:
    """Read pipeline dataset ``name`` as a batch (its latest version when the query runs).

    In a stream-static join each micro-batch reads the table's latest version, so updates to a dimension
    table show from the next batch on.

    Args:
        name: Any stored dataset or batch temporary view of the pipeline.
        **options: Delta batch read options, e.g. ``versionAsOf=3``.

    Example:
        >>> customers = dp.read("customers")  # doctest: +SKIP

    """
    from deltaflow.resolve import active_resolver

    return active_resolver().read(name, streaming=False, options=options)


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
        from deltaflow.resolve import active_resolver

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
