"""The pipeline's Delta tables themselves: created before any flow writes, checked, replaced.

Every table deltaflow owns is created here (empty, with its schema, partitioning, properties and comment)
before its first batch, so readers and downstream flows see a table as soon as the pipeline starts; a
flow's rows are checked against it before they are written; a full refresh replaces its rows here.

Examples:
    >>> ensure_table(spark, dataset, layout.table("bronze"), schema, {})  # doctest: +SKIP

"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING

from deltaflow.errors import ConfigError, SinkError, first_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from deltaflow.define.graph import Dataset, Flow
    from deltaflow.resolve.resolver import Resolver

def ensure_table(spark: SparkSession, dataset: Dataset, path: str, schema: StructType,
                 properties: Mapping[str, str]) -> None:
    """Create the Delta table at ``path`` with ``schema`` and table ``properties`` unless it exists.

    Raises:
        ConfigError: Delta refused the table's properties (one retention shorter than another, say).

    """
    from delta.tables import DeltaTable
    from pyspark.errors import IllegalArgumentException

    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
    if dataset.partition_cols:
        builder = builder.partitionedBy(*dataset.partition_cols)
    for key, value in properties.items():
        builder = builder.property(key, value)
    if dataset.comment:
        builder = builder.comment(dataset.comment)
    try:
        builder.execute()
    except IllegalArgumentException as exc:
        raise ConfigError(f"table '{dataset.name}': Delta refuses its table_properties: {first_line(exc)}",
                          location=str(dataset.location),
                          hint="change table_properties in deltaflow.yml or the definition") from None


def hold_declared_properties(resolver: Resolver, datasets: Collection[str],
                             on_message: Callable[[str], None]) -> None:
    """Set on each existing table of ``datasets`` the properties declared since it was created.

    Called at a run's start-up, with its tables leased and before any flow starts; the tables the run
    has just created already have them, and a table holding them all gets no commit.

    Examples:
        >>> hold_declared_properties(resolver, {"gold"}, print)  # doctest: +SKIP
        gold: set table properties delta.enableChangeDataFeed=true (declared since it was created)

    """
    for name in resolver.order():
        if name not in datasets or name not in resolver.settings:
            continue
        dataset = resolver.graph.datasets[name]
        set_now = set_declared(resolver.context.spark, dataset, resolver.context.layout.table(name),
                               resolver.table_properties(name), resolver.settings[name])
        if set_now:
            resolver.settings[name].update(set_now)
            shown = ", ".join(f"{k}={v}" for k, v in sorted(set_now.items()))
            on_message(f"{name}: set table properties {shown} (declared since it was created)")


def set_declared(spark: SparkSession, dataset: Dataset, path: str, declared: Mapping[str, str],
                 settings: Mapping[str, str]) -> dict[str, str]:
    """Set on the table at ``path`` the ``declared`` properties its ``settings`` lack; returns those set.

    One ``ALTER TABLE ... SET TBLPROPERTIES`` commit (metadata only: no rows change, so stream readers and
    writers go on as they were), none when every declared property holds. A property no longer declared
    is left on the table.

    Examples:
        >>> set_declared(spark, dataset, path, {"delta.enableChangeDataFeed": "true"}, {})  # doctest: +SKIP
        {'delta.enableChangeDataFeed': 'true'}

    Raises:
        ConfigError: Delta refused a property.

    """
    from pyspark.errors import AnalysisException, IllegalArgumentException

    from deltaflow.properties import to_set

    missing = to_set(declared, settings)
    if missing:
        pairs = ", ".join(f"{_literal(k)} = {_literal(v)}" for k, v in sorted(missing.items()))
        table = path.replace("`", "``")
        try:
            spark.sql(f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES ({pairs})")
        except (IllegalArgumentException, AnalysisException) as exc:
            raise ConfigError(f"table '{dataset.name}': Delta refuses its table_properties: "
                              f"{first_line(exc)}", location=str(dataset.location),
                              hint="change table_properties in deltaflow.yml or the definition") from None
    return missing


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def check_schema(spark: SparkSession, flow: Flow, dataset: Dataset, path: str, schema: StructType,
                 sole_writer: bool = True) -> None:
    """Check that rows of ``schema`` fit the table at ``path`` before the flow writes any.

    An added column is taken only with ``merge_schema``. A column the table has but the flow no longer
    writes (dropped or renamed), or a column whose type changed, stops the flow: writing on would put
    nulls or other values where the table's readers expect the old column.

    Raises:
        SinkError: Naming the column(s) and the way out.

    """
    from delta.tables import DeltaTable

    table = DeltaTable.forPath(spark, path).toDF().schema
    added = [f"'{f.name}' ({f.dataType.simpleString()})" for f in schema.fields if f.name not in table.names]
    gone = [f"'{name}'" for name in table.names if name not in schema.names]
    if gone and sole_writer and dataset.schema is None:
        new = f", and writes new column(s) {', '.join(added)}: a rename?" if added else ""
        raise SinkError(f"flow '{flow.name}' no longer writes column(s) {', '.join(gone)} of table "
                        f"'{dataset.name}'{new}", location=str(flow.location),
                        hint=f"a dropped or renamed column needs a rebuild: deltaflow run --full-refresh "
                        f"{dataset.name}")
    if added and not dataset.merge_schema:
        raise SinkError(f"flow '{flow.name}' writes new column(s) {', '.join(added)} that table "
                        f"'{dataset.name}' does not have", location=str(flow.location),
                        hint=f"declare '{dataset.name}' with merge_schema=True to add them, or leave them "
                        "out of the query")
    for field in schema.fields:
        if field.name in table.names:
            before, now = table[field.name].dataType.simpleString(), field.dataType.simpleString()
            if before != now:
                raise SinkError(f"flow '{flow.name}' writes column '{field.name}' as {now}, but table "
                                f"'{dataset.name}' holds it as {before}", location=str(flow.location),
                                hint="a type change needs a rebuild: deltaflow run --full-refresh "
                                f"{dataset.name}")


def ensure_quarantine(spark: SparkSession, path: str) -> None:
    """Create the quarantine table at ``path`` unless it exists."""
    from delta.tables import DeltaTable

    from deltaflow.sinks.quarantine import QUARANTINE_SCHEMA

    schema = spark.createDataFrame([], QUARANTINE_SCHEMA).schema
    DeltaTable.createIfNotExists(spark).location(path).addColumns(schema).execute()


def replace_rows(spark: SparkSession, dataset: Dataset, source: str, target: str) -> int:
    """Replace every row of the table at ``target`` by those of the table at ``source``, in one commit.

    Readers of ``target`` see the old rows until they see all the new ones. Returns the rows written.
    """
    staged = spark.read.format("delta").load(source)
    writer = staged.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
    if dataset.partition_cols:
        writer = writer.partitionBy(*dataset.partition_cols)
    writer.save(target)
    return int(staged.count())
