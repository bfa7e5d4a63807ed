"""The SparkSession factory: local and fast by default, any Spark conf from the spec.

Defaults (each overridable from the spec's ``configuration``): ``spark.master=local[*]``, shuffle
partitions equal to the cores, UI off, Delta's SQL extension and catalog, the Delta, Kafka-connector and
S3A jars from deltaflow's cache, S3A pointed at the spec's ``s3:``, driver logging at ERROR
(``$DELTAFLOW_LOG_LEVEL``, set by ``deltaflow -v``, changes it), and the driver's class archive
(:mod:`deltaflow.runtime.class_archive`) when ``deltaflow setup`` has built it. With
``$DELTAFLOW_SPARK_LOG`` set (a command's run log, :mod:`deltaflow.runtime.run_log`), everything the JVM
prints goes to that file instead of the terminal.

Examples:
    >>> spark = build_session(spec)  # doctest: +SKIP
    >>> spark.conf.get("spark.sql.shuffle.partitions")
    '2'

"""

from __future__ import annotations

import importlib
import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib import resources
from typing import TYPE_CHECKING

from deltaflow.errors import ConfigError
from deltaflow.runtime import class_archive, scheduling
from deltaflow.runtime.jars import driver_class_path, jars
from deltaflow.runtime.jvm_names import java_class, known_roots
from deltaflow.runtime.jvm_sockets import no_delay
from deltaflow.runtime.metastore import derby_log_option, metastore_conf
from deltaflow.runtime.run_log import LOG_VARIABLE, jvm_output, pyspark_logs_to_run_log
from deltaflow.runtime.scratch import with_scratch
from deltaflow.storage.s3 import hadoop_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from deltaflow.spec import Spec
    from deltaflow.storage import StorageLayout


#: The JIT of a small run's JVM: the C1 compiler only. On a 2-core machine the C2 compiler's threads take
#: cores from a run that lasts seconds; C1 alone made the orders example's incremental run 17 % faster
#: (24 -> 20 s) and a 56 MB first run no slower, but a 300 MB one 15 % slower. C1 alone keeps compiled code
#: in the 48 MB non-tiered code cache, which a run fills in about a minute: reserve what tiered
#: compilation would.
SMALL_RUN_JIT = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"


def driver_java_options(small_run: bool = False) -> str:
    """The driver JVM's options: logging, UTC, a deep stack, the class archive once built, and the JIT.

    The ``-Xss``: Spark matches a regex over the Python traceback of a foreachBatch interrupted by a stop;
    the regex recurses per character and overflows the default 1 MB thread stack. ``small_run``: the
    run is known to read little (:attr:`~deltaflow.runtime.nothing_new.NewInput.small`), see
    :data:`SMALL_RUN_JIT`.
    """
    log4j = resources.files("deltaflow.runtime") / "jvm" / "log4j2-driver.properties"
    options = f"-Dlog4j.configurationFile={log4j} -Duser.timezone=UTC -Xss16m"
    jit = SMALL_RUN_JIT if small_run else ""
    return " ".join(part for part in (options, class_archive.java_options(), jit) if part)


def driver_memory(total_bytes: int | None = None) -> str:
    """The driver's heap: a quarter of the machine's memory, from 2 GiB to 8 GiB.

    In local mode the driver is the whole of Spark: the state stores of every stateful query, the cached
    batches, compaction and VACUUM all share its heap. A 2 GiB heap ran out within an hour in a continuous
    clickstream run at half its sustainable rate (``make endurance``), during a compaction.

    Examples:
        >>> driver_memory(24 * 2**30), driver_memory(4 * 2**30), driver_memory(64 * 2**30)
        ('6g', '2g', '8g')

    """
    if total_bytes is None:
        try:
            total_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            total_bytes = 8 * 2**30
    return f"{min(8, max(2, total_bytes // 4 // 2**30))}g"


def default_conf(layout: StorageLayout | None = None, small_run: bool = False) -> dict[str, str]:
    """Deltaflow's Spark settings before the spec's ``configuration`` is applied.

    ``small_run``: see :func:`driver_java_options`.
    """
    cores = os.cpu_count() or 2
    conf = {
        "spark.master": f"local[{cores}]",
        "spark.app.name": "deltaflow",
        "spark.jars": ",".join(str(j) for j in jars("spark")),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.shuffle.partitions": str(cores),
        "spark.default.parallelism": str(cores),
        "spark.databricks.delta.snapshotPartitions": str(cores),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # Several drivers may commit to one S3 table: see io.deltaflow.storage.S3ConditionalLogStore.
        "spark.delta.logStore.s3a.impl": "io.deltaflow.storage.S3ConditionalLogStore",
        "spark.delta.logStore.s3.impl": "io.deltaflow.storage.S3ConditionalLogStore",
        # Streaming checkpoint files on S3 in one PUT each, not a temporary file and a copy: see
        # io.deltaflow.storage.ConditionalCheckpointFileManager (other file systems get Spark's own).
        "spark.sql.streaming.checkpointFileManagerClass":
            "io.deltaflow.storage.ConditionalCheckpointFileManager",
        "spark.driver.memory": driver_memory(),
        "spark.driver.extraJavaOptions": driver_java_options(small_run),
        "spark.sql.streaming.stopTimeout": "60s",
        # The UI is off, but its status store still keeps this much history in the driver's heap; Spark's
        # defaults (1,000 queries and jobs) make a long continuous run collect garbage for nothing.
        "spark.sql.ui.retainedExecutions": "100",
        "spark.ui.retainedJobs": "100",
        "spark.ui.retainedStages": "100",
        "spark.ui.retainedTasks": "10000",
        # The sinks cache a micro-batch for one batch only (quarantine's split, auto CDC's events, an
        # incremental view's partials); compressing that cache cost 0.4 s per 200,000 parsed JSON rows here,
        # uncompressed 0.13 s.
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        # Spark keeps 100 compiled classes of generated code. A pipeline's queries and the writes inside
        # its micro-batches need more (about 55 for the clickstream example), so at 100 every batch
        # evicted classes the next one compiled again: 47 compiles per batch against 2 for the
        # hand-written jobs, a third of a core in Janino and the JIT (docs/benchmarks.md, profile).
        "spark.sql.codegen.cache.maxEntries": "1000",
        # PySpark records the Python call site of every DataFrame and Column call, for the "== DataFrame =="
        # part of a runtime error: a failed import and four JVM round trips per call. F.col took 2.1 ms
        # with it, 0.7 ms without, and an auto CDC batch builds its plan from a few hundred such calls.
        # deltaflow's errors name the flow and its definition's line already; a spec can turn it back on.
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        **scheduling.SETTINGS,  # downstream flows' tasks first (runtime/scheduling.py)
    }
    if layout is not None and layout.is_local:
        conf["spark.sql.warehouse.dir"] = layout.warehouse
    return conf


def in_process_local_files(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with deltaflow's local file system on the driver's class path and, in local mode, in use.

    ``io.deltaflow.storage.InProcessLocalFileSystem`` and ``InProcessLocalFs`` are Hadoop's, without a
    ``chmod`` or ``readlink`` child process per file (why: ``InProcessRawLocalFileSystem.java``). Spark
    resolves ``spark.jars`` through that file system before it loads them, so their jar goes on the
    driver's own class path (in every mode: the class archive holds one class path); on a cluster the
    executors would not have it there, so only a local master (``local[N]``) gets the swap. The spec's own
    settings of these keys win.

    Examples:
        >>> in_process_local_files({"spark.master": "local[2]"})["spark.hadoop.fs.file.impl"]
        'io.deltaflow.storage.InProcessLocalFileSystem'

    """
    classpath = [str(driver_class_path()), conf.get("spark.driver.extraClassPath", "")]
    conf = {**conf, "spark.driver.extraClassPath": os.pathsep.join(filter(None, classpath))}
    if not re.fullmatch(r"local(\[.+\])?", conf["spark.master"]):  # local-cluster: executors of their own
        return conf
    return {"spark.hadoop.fs.file.impl": "io.deltaflow.storage.InProcessLocalFileSystem",
            "spark.hadoop.fs.AbstractFileSystem.file.impl": "io.deltaflow.storage.InProcessLocalFs", **conf}


def use_storage_keys(spark: SparkSession, spec: Spec) -> None:
    """Give a session started elsewhere (a notebook's, the tests') the spec's ``s3:`` keys.

    They go into the Hadoop configuration; S3A reads it when it first opens a bucket, so a session that
    already opened one keeps the keys it opened it with.
    """
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in hadoop_conf(spec.s3).items():
        hadoop.set(key.removeprefix("spark.hadoop."), value)


def check_master(master: str) -> None:
    """Make sure a standalone master (``spark://host:port``) answers, before Spark waits a minute for it.

    Raises:
        ConfigError: Nothing answers at the master's address, naming it.

    """
    import socket

    for address in master.removeprefix("spark://").split(","):  # several masters: one must answer
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=3):
                return
        except (OSError, ValueError):
            continue
    raise ConfigError(f"no Spark master answers at {master}", location="configuration: spark.master",
                      hint="start it ('deltaflow cluster start'), or leave spark.master out to run locally")


def build_session(spec: Spec | None = None, extra: dict[str, str] | None = None,
                  small_run: bool = False) -> SparkSession:
    """Start (or return the running) SparkSession configured for ``spec``.

    Args:
        spec: The pipeline spec; its ``spark.*`` configuration wins over deltaflow's defaults.
        extra: Settings that win over both (used by tests and benchmarks).
        small_run: The run is known to read little: its JVM compiles for a quick start (no effect on a
            session already running).

    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from deltaflow.storage import StorageLayout

    layout = StorageLayout.of(spec) if spec else None
    conf = default_conf(layout, small_run)
    if spec is not None and layout is not None:
        conf["spark.app.name"] = f"deltaflow:{spec.name}"
        conf.update(hadoop_conf(spec.s3))
        conf.update(metastore_conf(spec, layout))
        conf["spark.driver.extraJavaOptions"] += derby_log_option(spec, layout)
        conf.update(spec.spark_conf)
    conf.update(extra or {})
    conf = in_process_local_files(conf)
    if conf["spark.master"].startswith("spark://"):
        check_master(conf["spark.master"])
    if SparkContext._active_spark_context is None:
        conf = with_scratch(conf)  # a killed driver's temporary files, swept by the next driver's start
        # pyspark's first JVM call with arguments imports pandas (py4j asks its NumPy converter, which
        # imports pyspark.testing.utils): 0.4-0.5 s on the way to the session. Import it while the JVM boots.
        threading.Thread(target=importlib.import_module, args=("pyspark.testing.utils",), daemon=True,
                         name="deltaflow-imports").start()
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    with jvm_output(os.environ.get(LOG_VARIABLE)):
        spark = builder.getOrCreate()
    pyspark_logs_to_run_log()
    no_delay()
    known_roots(spark)
    keep_jvm_from_sigterm(spark)
    # a JSON column filtered on its fields parsed once, not once more per field (its javadoc says why)
    java_class(spark, "io.deltaflow.sql.ParseJsonOnce").install(spark._jsparkSession)
    if spec is not None and spec.s3 is not None:  # a session that was running keeps its Hadoop settings
        use_storage_keys(spark, spec)
    if level := os.environ.get("DELTAFLOW_LOG_LEVEL"):  # set by `deltaflow -v`
        spark.sparkContext.setLogLevel(level)
    return spark


def keep_jvm_from_sigterm(spark: SparkSession) -> None:
    """Have the driver JVM ignore SIGTERM: a stop is deltaflow's to make, between batches.

    Supervisors (systemd, ``timeout``, ``kill -- -PGID``, container runtimes) signal the whole process
    group, and the JVM is in it. Its own SIGTERM handler runs Spark's shutdown hook, which stops the
    SparkContext under the running queries before deltaflow's between-batches stop can: a clean stop turned
    into a crash. pyspark already has the JVM ignore SIGINT for the same reason; SIGKILL still ends it (a
    crash stays a crash), and it exits by itself when this process is gone (its stdin closes).

    Examples:
        >>> keep_jvm_from_sigterm(spark)  # doctest: +SKIP

    """
    signal = java_class(spark, "sun.misc.Signal")
    signal.handle(signal("TERM"), java_class(spark, "sun.misc.SignalHandler").SIG_IGN)


def kill_driver_jvm() -> None:
    """SIGKILL the Spark driver JVM this process started, if any: a stop "at once", as a crash would.

    Exactly once holds across a crash (the next run writes the batches in flight again, each once), and a
    JVM that is killed prints nothing, where one stopped under running queries prints a stack trace for
    each of them.

    Examples:
        >>> kill_driver_jvm()  # doctest: +SKIP

    """
    if "pyspark" not in sys.modules:  # no Spark started: nothing to kill, and nothing to import
        return
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)


@contextmanager
def session_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Set ``settings`` on ``spark``'s session for this block, then give each key its former value back.

    Examples:
        >>> with session_settings(spark, {"spark.sql.shuffle.partitions": "4"}):  # doctest: +SKIP
        ...     spark.sql("VACUUM ...").collect()

    """
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)
