"""A SQL definition file's statements as deltaflow datasets and flows (see :mod:`deltaflow.sdp.sql`).

Each query runs through :func:`deltaflow.sources.sql.pipeline_sql` when its flow is built, so it reads
the pipeline's datasets by name; a dataset's constraints become its flow's expectations (``EXPECT``
counts, ``DROP ROW`` drops, ``FAIL UPDATE`` stops the flow).

Examples:
    >>> sql = Path("transformations/gold.sql").read_text()  # doctest: +SKIP
    >>> register_sql_file(graph, sql, Path("transformations/gold.sql"))  # doctest: +SKIP

"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from deltaflow.define.cdc import cdc_flow
from deltaflow.define.expectations import expect, expect_or_drop, expect_or_fail
from deltaflow.define.fingerprints import SQL_ATTRIBUTE
from deltaflow.define.graph import Dataset, Flow, PipelineGraph
from deltaflow.define.registry import relative_location
from deltaflow.sdp.notes import one_session, table_notes
from deltaflow.sdp.sql import SqlDefinition, parse_sql

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_CONSTRAINT = {"warn": expect, "drop": expect_or_drop, "fail": expect_or_fail}


def register_sql_file(graph: PipelineGraph, text: str, path: Path) -> None:
    """Register every statement of SQL ``text`` (read from ``path``) into ``graph``.

    Raises:
        GraphError: A statement it does not understand, naming the file and line.

    """
    file = str(relative_location(str(path), 0)).rsplit(":", 1)[0]
    for definition in parse_sql(text, file):
        where = relative_location(str(path), definition.line)
        if definition.kind == "set":
            graph.notes.append(f"{where}: {one_session(f'SET {definition.name}')}")
            continue
        if definition.kind != "flow":
            graph.add_dataset(Dataset(
                name=definition.name, kind=definition.kind, location=where, comment=definition.comment,
                partition_cols=definition.partition_cols, table_properties=definition.table_properties,
                schema=definition.columns if definition.kind != "temporary_view" else None))
            if definition.kind == "temporary_view" and definition.columns:
                graph.notes.append(f"{where}: the column list of temporary view '{definition.name}' is not "
                                   "applied; name the columns in its query")
            graph.notes += [f"{where}: {text}" for text in
                            table_notes(definition.name, definition.using, definition.cluster_by)]
        if definition.cdc is not None and definition.source is not None:
            graph.add_flow(cdc_flow(definition.name, definition.target or definition.name, definition.source,
                                    definition.cdc, where))
            continue
        if definition.query is None:
            continue  # a streaming table that flows fill
        func = _query(definition, file)
        for constraint in definition.constraints:
            func = _CONSTRAINT[constraint.action](constraint.name, constraint.condition)(func)
        target = definition.target or definition.name
        graph.add_flow(Flow(name=definition.name, target=target, func=func, location=where))


def _query(definition: SqlDefinition, file: str) -> Callable[[], DataFrame]:
    query, line = definition.query or "", definition.query_line

    def run_query() -> DataFrame:
        from deltaflow.sources.sql import pipeline_sql

        return pipeline_sql(query, file, line)

    run_query.__name__ = definition.name
    setattr(run_query, SQL_ATTRIBUTE, query)  # its fingerprint is the query, not this function's code
    return run_query
