"""Spark Declarative Pipelines' decorators, registering into deltaflow's graph.

A definition file written for SDP imports ``from pyspark import pipelines as dp``; its decorators and
functions build SDP's own descriptions (``StreamingTable``, ``MaterializedView``, ``Flow``...) and hand
them to the active ``GraphElementRegistry``. While deltaflow loads the files, that registry is a
:class:`SdpRegistry`, which turns each into deltaflow's :class:`~deltaflow.define.graph.Dataset` and
:class:`~deltaflow.define.graph.Flow`. Every argument is honoured, or (where it has no meaning here) kept as a
note naming its file and line (:attr:`PipelineGraph.notes`), never silently dropped.

Examples:
    >>> with sdp_registration(graph):  # doctest: +SKIP
    ...     runpy.run_path("transformations/orders.py")  # 'from pyspark import pipelines as dp'

"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.pipelines import flow as sdp_flow
from pyspark.pipelines import output as sdp_output
from pyspark.pipelines.graph_element_registry import (
    GraphElementRegistry,
    graph_element_registration_context,
)

from deltaflow.define.graph import AutoCdc, Dataset, DatasetKind, Flow, SourceLocation
from deltaflow.define.registry import caller_location, relative_location
from deltaflow.sdp.notes import one_session, table_notes
from deltaflow.sdp.sql_flows import register_sql_file

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from deltaflow.define.graph import PipelineGraph

_KINDS: dict[type, DatasetKind] = {sdp_output.MaterializedView: "materialized_view",
                                   sdp_output.StreamingTable: "table",
                                   sdp_output.TemporaryView: "temporary_view", sdp_output.Sink: "sink"}


def _where(location: Any) -> SourceLocation:
    return relative_location(location.filename, location.line_number or 0)


def column_sql(column: Any) -> str:
    """The SQL text of a column given to SDP: a name, ``expr("...")``, ``col("...")``.

    Examples:
        >>> column_sql("ts")
        'ts'

    """
    if isinstance(column, str):
        return column
    inner = getattr(column, "_expr", None)
    for attribute in ("_expr", "_unparsed_identifier"):  # Spark Connect's SQLExpression, ColumnReference
        if isinstance(text := getattr(inner, attribute, None), str):
            return text
    shown = repr(column)  # a classic Column: Column<'name'>
    return shown[len("Column<'"):-len("'>")] if shown.startswith("Column<'") else shown


class SdpRegistry(GraphElementRegistry):
    """SDP's registry interface over deltaflow's graph (see the module docstring)."""

    def __init__(self, graph: PipelineGraph) -> None:
        self.graph = graph

    def note(self, where: SourceLocation, text: str) -> None:
        """Record what deltaflow does differently from SDP here."""
        self.graph.notes.append(f"{where}: {text}")

    def register_output(self, output: Any) -> None:  # noqa: D102
        where = _where(output.source_code_location)
        kind = _KINDS[type(output)]
        if kind == "sink":
            self.graph.add_dataset(Dataset(name=output.name, kind="sink", location=where,
                                           handler=sink_writer(output.format, dict(output.options))))
            if output.format != "delta":
                self.note(where, f"sink '{output.name}' ({output.format}): each batch is written once per "
                          "attempt; a batch replayed after a crash may be written again (Delta sinks are "
                          "exactly once)")
            return
        if isinstance(output, sdp_output.Table):
            for text in table_notes(output.name, output.format, output.cluster_by):
                self.note(where, text)
        self.graph.add_dataset(Dataset(
            name=output.name, kind=kind, location=where, comment=output.comment,
            partition_cols=tuple(getattr(output, "partition_cols", None) or ()),
            table_properties=dict(getattr(output, "table_properties", None) or {}),
            schema=getattr(output, "schema", None)))

    def register_flow(self, flow: Any) -> None:  # noqa: D102
        where = _where(flow.source_code_location)
        if flow.spark_conf:
            self.note(where, one_session(f"spark_conf of flow '{flow.name}' ({', '.join(flow.spark_conf)})"))
        self.graph.add_flow(Flow(name=flow.name, target=flow.target, func=flow.func, location=where))

    def register_auto_cdc_flow(self, flow: sdp_flow.AutoCdcFlow) -> None:  # noqa: D102
        from deltaflow.define.cdc import cdc_flow

        cdc = AutoCdc(keys=tuple(map(column_sql, flow.keys)), sequence_by=(column_sql(flow.sequence_by),),
                      apply_as_deletes=(column_sql(flow.apply_as_deletes)
                                        if flow.apply_as_deletes is not None else None),
                      column_list=_names(flow.column_list),
                      except_column_list=_names(flow.except_column_list))
        self.graph.add_flow(cdc_flow(flow.name or flow.target, flow.target, flow.source, cdc,
                                     _where(flow.source_code_location)))

    def register_sql(self, sql_text: str, file_path: Path) -> None:  # noqa: D102
        register_sql_file(self.graph, sql_text, file_path)


def _names(columns: list[Any] | None) -> tuple[str, ...] | None:
    return tuple(map(column_sql, columns)) if columns is not None else None


def sink_writer(format: str, options: Mapping[str, str]) -> Any:
    """The batch handler of ``dp.create_sink(name, format, options)``: each batch written with ``format``.

    A Delta sink's ``path`` (or ``tableName``) gets each batch once, stamped like every deltaflow write.
    """
    def write(df: DataFrame, batch_id: int) -> None:
        writer = df.write.format(format).mode("append")
        rest = {k: v for k, v in options.items() if k not in ("path", "tableName")}
        writer = writer.options(**rest)
        if "tableName" in options:
            writer.saveAsTable(options["tableName"])
        elif "path" in options:
            writer.save(options["path"])
        else:
            writer.save()

    return write


def create_auto_cdc_flow(
    target: str, source: str, keys: list[Any], sequence_by: Any, apply_as_deletes: Any = None,
    column_list: list[Any] | None = None, except_column_list: list[Any] | None = None,
    stored_as_scd_type: int | str | None = None, name: str | None = None, *,
    track_history_column_list: list[Any] | None = None, apply_as_truncates: Any = None,
    ignore_null_updates: bool = False,
) -> None:
    """SDP's ``dp.create_auto_cdc_flow``, with the arguments SDP 4.3 brings.

    ``stored_as_scd_type=2`` and ``track_history_column_list``, which pyspark 4.2's own function refuses,
    are honoured; columns may be names or ``F.col``/``F.expr``, as SDP takes them. See
    :func:`deltaflow.create_auto_cdc_flow`.

    Examples:
        >>> dp.create_auto_cdc_flow(target="customers", source="events", keys=["id"],  # doctest: +SKIP
        ...                         sequence_by="ts", stored_as_scd_type=2)

    """
    from deltaflow.define.cdc import add_auto_cdc_flow

    add_auto_cdc_flow(
        caller_location(), target, source, [column_sql(k) for k in keys],
        [column_sql(c) for c in sequence_by] if isinstance(sequence_by, list) else column_sql(sequence_by),
        apply_as_deletes=column_sql(apply_as_deletes) if apply_as_deletes is not None else None,
        apply_as_truncates=column_sql(apply_as_truncates) if apply_as_truncates is not None else None,
        column_list=_listed(column_list), except_column_list=_listed(except_column_list),
        stored_as_scd_type=1 if stored_as_scd_type is None else stored_as_scd_type,
        track_history_column_list=_listed(track_history_column_list), ignore_null_updates=ignore_null_updates,
        name=name)


def _listed(columns: list[Any] | None) -> list[str] | None:
    return [column_sql(c) for c in columns] if columns is not None else None


@contextmanager
def sdp_registration(graph: PipelineGraph) -> Iterator[SdpRegistry]:
    """Within the block, SDP's decorators register into ``graph`` (its auto CDC function: deltaflow's)."""
    import pyspark.pipelines
    import pyspark.pipelines.api

    registry = SdpRegistry(graph)
    modules = (pyspark.pipelines, pyspark.pipelines.api)
    saved = [getattr(module, "create_auto_cdc_flow") for module in modules]  # noqa: B009
    for module in modules:
        setattr(module, "create_auto_cdc_flow", create_auto_cdc_flow)  # noqa: B010
    try:
        with graph_element_registration_context(registry):
            yield registry
    finally:
        for module, original in zip(modules, saved, strict=True):
            setattr(module, "create_auto_cdc_flow", original)  # noqa: B010
