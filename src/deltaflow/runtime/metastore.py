"""Registering a pipeline's tables by name in the Hive Metastore its spec names (``metastore:``).

With a ``uri``, the run's session is a client of that service (``deltaflow metastore start``, or a shared
one); without, the metastore is embedded: Derby under ``storage/_metastore``, opened by the run's own JVM.
Derby lets one JVM open it at a time, so a run that finds it held (another run of the project, a notebook)
registers nothing and says so, rather than stopping.

Each stored dataset is registered as an external Delta table at its layout path, in the spec's database:
``CREATE TABLE db.name USING delta LOCATION '<path>'``. The metastore keeps only the name and the place;
the schema, partitioning and properties are read from the table's Delta log by whoever opens it, so the
registration stays true across full refreshes, rewinds and schema changes without being touched again.

A name already registered at another place belongs to another pipeline (or to someone's own table): a run
refuses it before writing anything, in one line naming the table and both places.

Examples:
    >>> registry = TableRegistry(spark, spec, layout)  # doctest: +SKIP
    >>> registry.check(["bronze_events", "gold_actions"])  # doctest: +SKIP
    >>> registry.register(["bronze_events", "gold_actions"])  # doctest: +SKIP
    ['shop.bronze_events', 'shop.gold_actions']

"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deltaflow.errors import ConfigError, first_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from deltaflow.spec import Spec
    from deltaflow.storage import StorageLayout


def metastore_conf(spec: Spec, layout: StorageLayout) -> dict[str, str]:
    """The Spark settings a session needs to reach ``spec``'s metastore (none without one).

    Raises:
        ConfigError: An embedded metastore over storage that is not on the local disk.

    Examples:
        >>> metastore_conf(spec, layout)["spark.sql.catalogImplementation"]  # doctest: +SKIP
        'hive'

    """
    if spec.metastore is None:
        return {}
    conf = {"spark.sql.catalogImplementation": "hive"}
    if spec.metastore.uri is not None:
        return {**conf, "spark.hadoop.hive.metastore.uris": spec.metastore.uri}
    if not layout.is_local:
        raise ConfigError("metastore: an embedded metastore needs storage on the local disk",
                          location=str(spec.path or "spec"),
                          hint="name a shared one with metastore.uri: thrift://host:9083")
    return {**conf, "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={layout.metastore}/db;create=true"}


def derby_log_option(spec: Spec, layout: StorageLayout) -> str:
    """The driver JVM's option that puts Derby's log beside its database, not in the working folder.

    Empty without an embedded metastore; with one, its folder is made here (Derby opens its log first).
    """
    if spec.metastore is None or spec.metastore.uri is not None or not layout.is_local:
        return ""
    Path(layout.metastore).mkdir(parents=True, exist_ok=True)
    return f" -Dderby.stream.error.file={layout.metastore}/derby.log"


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

    Build it with :meth:`open`.
    """

    def __init__(self, spark: SparkSession, spec: Spec, layout: StorageLayout, catalog: Any) -> None:
        assert spec.metastore is not None
        self.spark, self.layout, self._catalog = spark, layout, catalog
        self.uri = spec.metastore.uri or f"embedded ({layout.metastore})"
        self.database = database_of(spec)

    @classmethod
    def open(cls, spark: SparkSession, spec: Spec, layout: StorageLayout,
             on_message: Callable[[str], None] | None = None) -> TableRegistry | None:
        """The registry of ``spec``'s metastore through ``spark``; None, having said why, if none is usable.

        An embedded metastore is unusable by a session without Hive support, or while another Spark
        application has its Derby open.

        Raises:
            ConfigError: The spec names a metastore ``uri`` and the session was started without Hive
                support (a session given to the pipeline, in a notebook or a test), or it does not answer.

        """
        assert spec.metastore is not None
        say = on_message or (lambda message: None)
        if spark.conf.get("spark.sql.catalogImplementation", "in-memory") != "hive":
            if spec.metastore.uri is None:
                say(f"metastore embedded ({layout.metastore}): this SparkSession has no Hive support: no "
                    "table registered")
                return None
            raise ConfigError(f"metastore.uri: this SparkSession was started without Hive support, so no "
                              f"table can be registered in {spec.metastore.uri}",
                              location=str(spec.path or "spec"), hint="start it with "
                              "spark.sql.catalogImplementation=hive and spark.hadoop.hive.metastore.uris="
                              f"{spec.metastore.uri}, or let deltaflow start it")
        try:  # opens the metastore: Derby, or a connection to the service
            catalog = spark._jsparkSession.sharedState().externalCatalog()
            catalog.databaseExists("default")
        except Exception as exc:
            if spec.metastore.uri is not None:
                raise ConfigError(f"metastore.uri: {spec.metastore.uri} does not answer",
                                  location=str(spec.path or "spec"),
                                  hint="start it (deltaflow metastore start) or fix the address") from exc
            say(f"metastore embedded ({layout.metastore}): in use by another Spark application (another "
                "run of this pipeline, or a notebook): no table registered by this run")
            return None
        return cls(spark, spec, layout, catalog)

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


class Registration:
    """One run's registration of its tables: names checked before the run writes, tables registered beside it.

    With a metastore service, the names are checked first (another pipeline may hold one) and the tables
    that exist are registered before the run goes on. An embedded metastore is this pipeline's own (under
    its storage): nothing to check, so it is opened and filled on a thread of its own while the run starts
    (opening Derby takes seconds, creating it the first time more). :meth:`finish` waits for that and
    registers the tables the run made since.

    Args:
        spark: The run's session.
        spec: The pipeline's spec (its ``metastore`` section is set).
        layout: Its storage.
        tables: The pipeline's table names (the stored datasets).
        say: Told what was registered, or why nothing was.

    """

    def __init__(self, spark: SparkSession, spec: Spec, layout: StorageLayout, tables: list[str],
                 say: Callable[[str], None]) -> None:
        assert spec.metastore is not None
        self.spark, self.spec, self.layout, self.tables, self.say = spark, spec, layout, tables, say
        self.embedded = spec.metastore.uri is None
        self.registry: TableRegistry | None = None
        self._thread: threading.Thread | None = None
        self._failed: BaseException | None = None

    def check(self) -> None:
        """A service: open it, and refuse a name registered at another place (before anything is written).

        Raises:
            ConfigError: See :meth:`TableRegistry.open` and :meth:`TableRegistry.check`.

        """
        if not self.embedded:
            self.registry = TableRegistry.open(self.spark, self.spec, self.layout, self.say)
            assert self.registry is not None
            self.registry.check(sorted({*self.tables, *self.layout.table_names()}))

    def start(self) -> None:
        """Register the tables that exist now (an embedded metastore: on a thread, see the class)."""
        if not self.embedded:
            self._register()
            return
        self._thread = threading.Thread(target=self._open_and_register, name="deltaflow-metastore",
                                        daemon=True)
        self._thread.start()

    def finish(self) -> None:
        """Wait for :meth:`start`'s registration, then register the tables the run made since.

        A failure is said, not raised: the run's tables are written, and its outcome is what it reports.
        """
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._failed is None and self.registry is not None:
            try:
                self._register()
            except Exception as exc:
                self._failed = exc
        if self._failed is not None:
            self.say(f"metastore {self._where}: not every table registered: {first_line(self._failed)}")

    @property
    def _where(self) -> str:
        return self.registry.uri if self.registry is not None else f"embedded ({self.layout.metastore})"

    def _open_and_register(self) -> None:
        try:
            self.registry = TableRegistry.open(self.spark, self.spec, self.layout, self.say)
            if self.registry is not None:
                self._register()
        except Exception as exc:  # the run goes on: its tables are there, by path
            self._failed = exc

    def _register(self) -> None:
        assert self.registry is not None
        if names := self.registry.register(self.layout.table_names()):
            self.say(f"metastore {self.registry.uri}: registered {', '.join(names)}")
