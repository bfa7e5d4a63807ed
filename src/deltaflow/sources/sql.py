"""``spark.sql`` inside a definition: the query's tables that are pipeline datasets read the pipeline's.

Spark resolves the query: each name it cannot find that is a dataset of the pipeline becomes a temporary
view of that dataset's read (a stream where the query says ``STREAM(name)`` / ``STREAM name``, a batch
elsewhere), recorded as the flow's input like ``spark.read.table``; once the query is analysed the views
are dropped again, so no later query meets them. A parse error names the file line of the query's line.

Examples:
    >>> @dp.materialized_view  # doctest: +SKIP
    ... def totals():
    ...     return spark.sql("SELECT customer, sum(amount) AS total FROM orders GROUP BY customer")

"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import TYPE_CHECKING

from deltaflow.define.context import current
from deltaflow.errors import GraphError
from deltaflow.resolve.state import active_resolver

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_NOT_FOUND = re.compile(r"TABLE_OR_VIEW_NOT_FOUND\] The table or view (\S+) cannot be found")
_NOT_STREAMING = re.compile(r"(\S+) is not a temp view of streaming logical plan")
_PARSE_AT = re.compile(r"\(line (\d+), pos \d+\)")


def pipeline_sql(query: str, where: str | None = None, first_line: int = 1) -> DataFrame:
    """``spark.sql(query)`` with the pipeline's datasets readable by name.

    Args:
        query: One SQL query (``SELECT ...``).
        where: The file the query comes from, for errors (``file`` or ``file:line``).
        first_line: The query's first line in that file.

    Raises:
        GraphError: The query does not parse (at its line) or reads something that does not exist.

    """
    from pyspark.errors import AnalysisException, ParseException
    from pyspark.logger import PySparkLogger

    spark = current().spark
    resolver = active_resolver()
    views: dict[str, bool] = {}  # dataset -> read as a stream
    # PySpark logs every failed query whole (with its Java stack) to stderr: here a failure is expected
    quiet = PySparkLogger.getLogger("SQLQueryContextLogger")
    was_disabled, quiet.disabled = quiet.disabled, True
    try:
        while True:
            try:
                return spark.sql(query)
            except ParseException as exc:
                raise GraphError(f"SQL: {_first(exc)}", location=_at(where, first_line, str(exc))) from None
            except AnalysisException as exc:
                name = _missing(str(exc), resolver.graph.datasets, views)
                if name is None:
                    raise GraphError(f"SQL: {_first(exc)}", location=_at(where, first_line, "")) from None
                views[name] = name in views  # asked for again: Spark wants it as a stream
                resolver.read(name, streaming=views[name]).createOrReplaceTempView(name)
    finally:
        quiet.disabled = was_disabled
        for name in views:
            spark.catalog.dropTempView(name)


def _missing(message: str, datasets: Collection[str], views: dict[str, bool]) -> str | None:
    """The pipeline dataset Spark could not read as asked, if that is what went wrong."""
    if (found := _NOT_FOUND.search(message)) is not None:
        name = found.group(1).replace("`", "").split(".")[-1]
        return name if name in datasets and name not in views else None
    if (stream := _NOT_STREAMING.search(message)) is not None:
        name = stream.group(1).strip("`").split(".")[-1]
        return name if views.get(name) is False else None
    return None


def _first(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def _at(where: str | None, first_line: int, message: str) -> str | None:
    if where is None:
        return None
    match = _PARSE_AT.search(message)
    return f"{where}:{first_line + int(match.group(1)) - 1}" if match else f"{where}:{first_line}"
