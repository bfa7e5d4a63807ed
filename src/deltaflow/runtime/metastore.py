"""Registering a pipeline's tables by name in the Hive Metastore its spec names (``metastore:``).

Each stored dataset is registered as an external Delta table at its layout path, in the spec's database:
``CREATE TABLE db.name USING delta LOCATION '<path>'``. The metastore keeps only the name and the place;
the schema, partitioning and properties are read from the table's Delta log by whoever opens it, so the
registration stays true across full refreshes, rewinds and schema changes without being touched again.

A name already registered at another place belongs to another pipeline (or to someone's own table): a run
refuses it before writing anything, in one line naming the table and both places.

Example:
    >>> registry = TableRegistry(spark, spec, layout)  # doctest: +SKIP
    >>> registry.check(["bronze_events", "gold_actions"])  # doctest: +SKIP
    >>> registry.register(["bronze_events", "gold_actions"])  # doctest: +SKIP
    ['shop.bronze_events', 'shop.gold_actions']

"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from deltaflow.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from deltaflow.spec import Spec
    from deltaflow.storage import StorageLayout


def metastore_conf(spec: Spec) -> dict[str, str]:
    """The Spark settings a session needs to reach ``spec``'s metastore (none without one).

    Example:
        >>> metastore_conf(spec)["spark.sql.catalogImplementation"]  # doctest: +SKIP
        'hive'

    """
    if spec.metastore is None:
        return {}
    return {"spark.sql.catalogImplementation": "hive", "spark.hadoop.hive.metastore.uris": spec.metastore.uri}


def database_of(spec: Spec) -> str:
    """The database ``spec``'s tables are registered in."""
    given = spec.metastore.database if spec.metastore is not None else None
    return given or spec.name.replace("-", "_")


def _place(location: str) -> str:
    """A table's place, spelled one way (the metastore writes ``file:/x`` for the path ``/x``)."""
    for prefix in ("file://", "file:"):
        if location.startswith(prefix):
            location = location.removeprefix(prefix)
            break
    return location.rstrip("/") or "/"


class TableRegistry:
    """The pipeline's tables in the metastore: which names are free, taken by it, or taken by another.

    Args:
        spark: A session started with :func:`metastore_conf` (Hive support, the metastore's URI).
        spec: The pipeline's spec (its ``metastore`` section is set).
        layout: Its storage: where each table is.

    Raises:
        ConfigError: The session was started without Hive support (a session given to the pipeline, in a
            notebook or a test, that lacks :func:`metastore_conf`'s settings).

    """

    def __init__(self, spark: SparkSession, spec: Spec, layout: StorageLayout) -> None:
        assert spec.metastore is not None
        self.spark, self.layout = spark, layout
        self.uri = spec.metastore.uri
        self.database = database_of(spec)
        if spark.conf.get("spark.sql.catalogImplementation", "in-memory") != "hive":
            raise ConfigError(f"metastore.uri: this SparkSession was started without Hive support, so no "
                              f"table can be registered in {self.uri}", location=str(spec.path or "spec"),
                              hint="start it with spark.sql.catalogImplementation=hive and "
                              f"spark.hadoop.hive.metastore.uris={self.uri}, or let deltaflow start it")
        self._catalog = spark._jsparkSession.sharedState().externalCatalog()

    def _registered_at(self, table: str) -> str | None:
        """Where the metastore says ``database.table`` is; None when no such name is registered."""
        if not self._catalog.databaseExists(self.database) or not self._catalog.tableExists(self.database,
                                                                                            table):
            return None
        uri = self._catalog.getTable(self.database, table).storage().locationUri()
        return _place(str(uri.get())) if uri.isDefined() else ""

    def check(self, tables: Iterable[str]) -> None:
        """Refuse, before anything is written, a name registered at a place that is not this pipeline's.

        Raises:
            ConfigError: One line naming the table, where it is registered and where this pipeline keeps it.

        """
        for table in tables:
            found = self._registered_at(table)
            ours = _place(self.layout.table(table))
            if found is not None and found != ours:
                raise ConfigError(
                    f"table '{self.database}.{table}' in the metastore {self.uri} is another table, at "
                    f"{found or 'no location'}; this pipeline keeps its '{table}' at {ours}",
                    location="metastore", hint="give this pipeline a database of its own (metastore.database "
                    "in its spec), or drop that registration if it is stale")

    def register(self, tables: Iterable[str]) -> list[str]:
        """Register each of ``tables`` on storage and not registered yet; the names it registered."""
        done: list[str] = []
        fs = self.layout.fs
        for table in tables:
            if not fs.exists(self.layout.delta_log(table)) or self._registered_at(table) is not None:
                continue
            if not self._catalog.databaseExists(self.database):
                self.spark.sql(f"CREATE DATABASE IF NOT EXISTS `{self.database}`")
            path = self.layout.table(table).replace("'", "\\'")
            self.spark.sql(f"CREATE TABLE IF NOT EXISTS `{self.database}`.`{table}` USING delta "
                           f"LOCATION '{path}'")
            done.append(f"{self.database}.{table}")
        return done
