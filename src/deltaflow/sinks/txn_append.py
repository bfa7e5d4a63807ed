"""Idempotent Delta appends and rewrites that do not replay the table's state: the check, from the ``.crc``.

Delta skips a write whose ``(txnAppId, txnVersion)`` it has already committed. In delta-spark 4.4.0 that
check (``OptimisticTransaction.txnVersion``, made by Delta's streaming sink and by every write given the
pair) reads ``Snapshot.transactions``, which replays the whole state of the table, every file, once per
snapshot, so once per commit: over a log of 1,000,000 files, 12 s for an append of 10 rows against 0.5 s
for a plain one (``docs/benchmarks.md``, the growth part). The checksum Delta writes beside each version
(``<version>.crc``) already lists the table's set transactions; releases after 4.4.0 read them there
(delta-io/delta#6929).

:func:`append_once` does what Delta's streaming sink does in one transaction (the check, the files, a
``SetTransaction`` action, the commit as a ``STREAMING UPDATE``), but asks the snapshot's checksum for the
app id's last version, and asks Delta only when the checksum cannot answer (no ``.crc`` for that
version, as after a commit by another engine, or no set transactions in it). The app id is registered as
read either way, so a concurrent commit of the same app id fails this one, as in Delta's own check. Rows
whose schema or partitioning is not exactly the table's go through Delta's writer with the pair instead,
which fills generated and missing columns and reports what does not fit.

:func:`replace_once` does the same for a small table rewritten whole by each batch (an incremental view's
new totals): the current files are listed by the checksum too (Delta keeps them there while the table has
few), handed to the caller to read (the rows to keep), and removed in the commit that adds the new ones.

Examples:
    >>> append_once(rows, layout.table("bronze"), app_id="3f2a...", batch_id=7)  # doctest: +SKIP
    True

"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from deltaflow.runtime.jvm_names import java_class
from deltaflow.sinks.idempotent import idempotent_writes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_SQL = "org.apache.spark.sql"
_DELTA = f"{_SQL}.delta"


def append_once(rows: DataFrame, path: str, *, app_id: str, batch_id: int,
                partition_cols: Sequence[str] = ()) -> bool:
    """Append ``rows`` to the Delta table at ``path`` unless ``app_id`` already committed ``batch_id``.

    Returns:
        False when an earlier attempt committed the batch (nothing written); True when this call committed
        it, and whenever Delta's writer took the rows (it skips a committed batch without saying so).

    """
    session = rows.sparkSession
    txn = java_class(session, f"{_DELTA}.DeltaLog").forTable(session._jsparkSession, path).startTransaction()
    snapshot = txn.snapshot()
    if not _fits(rows, snapshot, partition_cols):
        return _delta_writer(rows, path, app_id, batch_id, partition_cols)
    done = recorded_version(snapshot, app_id)
    if done is None:
        done = int(txn.txnVersion(app_id))  # Delta's own check: replays the state
    else:
        txn.readTxn().addOne(app_id)  # what txnVersion registers, for the commit's conflict check
    if done >= batch_id:
        return False
    files = txn.writeFiles(rows._jdf)
    stamp = _stamp(session, app_id, batch_id, int(time.time() * 1000))
    operation = java_class(session, f"{_DELTA}.DeltaOperations$StreamingUpdate")(
        java_class(session, f"{_SQL}.streaming.OutputMode").Append(), app_id, batch_id,
        java_class(session, "scala.Option").empty())
    _count_files(session, txn, int(files.size()))
    txn.commit(files.prepended(stamp), operation)
    return True


def replace_once(session: SparkSession, path: str, rows: Callable[[list[str]], DataFrame], *, app_id: str,
                 batch_id: int) -> bool | None:
    """Replace every row of the Delta table at ``path`` with ``rows(files)``, once per ``app_id``'s batch.

    ``files`` are the table's current data files, for ``rows`` to read what it keeps. One commit (the new
    files, the old ones removed, a ``SetTransaction``), recorded as an overwrite. The whole table is
    registered as read, so a concurrent commit that removed a file (a compaction) fails it, for the caller
    to run again.

    Returns:
        True when this call committed the batch, False when an earlier attempt had; None when the checksum
        does not list the files or the batches (or a file has deletion vectors, or the rows are not exactly
        the table's columns): nothing was written, and the caller writes through Delta instead.

    Examples:
        >>> keep = lambda files: spark.read.parquet(*files).where("n > 0")  # doctest: +SKIP
        >>> replace_once(spark, path, keep, app_id="deltaflow:gold/gold/0:...", batch_id=7)  # doctest: +SKIP
        True

    """
    txn = java_class(session, f"{_DELTA}.DeltaLog").forTable(session._jsparkSession, path).startTransaction()
    snapshot = txn.snapshot()
    current = _current_files(snapshot)
    done = recorded_version(snapshot, app_id) if current is not None else None
    if current is None or done is None:
        return None
    txn.readTxn().addOne(app_id)
    if done >= batch_id:
        return False
    new = rows([_data_path(path, add) for add in current])
    if not _fits(new, snapshot, ()):
        return None
    txn.readWholeTable()
    files = txn.writeFiles(new._jdf)
    now = int(time.time() * 1000)
    actions = files.prepended(_stamp(session, app_id, batch_id, now))
    for add in current:
        actions = actions.prepended(add.removeWithTimestamp(now, True))
    none = java_class(session, "scala.Option").empty()
    overwrite = java_class(session, f"{_SQL}.SaveMode").Overwrite
    operation = java_class(session, f"{_DELTA}.DeltaOperations$Write")(overwrite, *[none] * 8)
    _count_files(session, txn, int(files.size()), len(current))
    txn.commit(actions, operation)
    return True


def _current_files(snapshot: Any) -> list[Any] | None:
    """The snapshot's data files as its checksum lists them (None: unlisted, or one has deletion vectors)."""
    checksum = snapshot.checksumOpt()
    if snapshot.version() < 0 or not checksum.isDefined() or not checksum.get().allFiles().isDefined():
        return None
    listed = checksum.get().allFiles().get().iterator()
    files = []
    while listed.hasNext():
        add = listed.next()
        if add.deletionVector() is not None:
            return None
        files.append(add)
    return files


def _data_path(table: str, add: Any) -> str:
    """Where file ``add`` of the table at ``table`` is (its path is relative and URI-encoded, or absolute)."""
    relative = unquote(str(add.path()))
    return relative if "://" in relative or relative.startswith("/") else f"{table.rstrip('/')}/{relative}"


def _stamp(session: Any, app_id: str, batch_id: int, now: int) -> Any:
    """The ``SetTransaction`` action recording that ``app_id`` committed ``batch_id``."""
    when = java_class(session, "scala.Some")(java_class(session, "java.lang.Long").valueOf(now))
    return java_class(session, f"{_DELTA}.actions.SetTransaction")(app_id, batch_id, when)


def recorded_version(snapshot: Any, app_id: str) -> int | None:
    """The last version ``app_id`` committed, from the snapshot's checksum: -1 if none, None if unknown."""
    checksum = snapshot.checksumOpt()
    if not checksum.isDefined() or not checksum.get().setTransactions().isDefined():
        return None
    found = -1
    recorded = checksum.get().setTransactions().get().iterator()
    while recorded.hasNext():
        stamp = recorded.next()
        if stamp.appId() == app_id:
            found = max(found, int(stamp.version()))
    return found


def _count_files(session: Any, txn: Any, added: int, removed: int = 0) -> None:
    """The commit's ``numAddedFiles`` / ``numRemovedFiles`` in its metrics, as Delta's sink reports them."""
    sc = session.sparkContext._jsc.sc()
    metrics = java_class(session, "java.util.HashMap")()
    for name, value in (("numAddedFiles", added), ("numRemovedFiles", removed)):
        metric = java_class(session, f"{_SQL}.execution.metric.SQLMetrics").createMetric(sc, name)
        metric.set(value)
        metrics.put(name, metric)
    scala_map = java_class(session, "org.apache.spark.api.python.PythonUtils").toScalaMap(metrics)
    txn.registerSQLMetrics(session._jsparkSession, scala_map)


def _fits(rows: DataFrame, snapshot: Any, partition_cols: Sequence[str]) -> bool:
    """Whether the table exists with exactly the rows' columns (nullability aside) and partitioning.

    A column Delta fills or maps itself (generated, identity, column mapping) sends the rows to Delta's
    writer; a ``NOT NULL`` or ``CHECK`` constraint does not, since ``writeFiles`` enforces them.
    """
    from pyspark.sql.types import StructType

    if snapshot.version() < 0:
        return False
    table = StructType.fromJson(json.loads(snapshot.schema().json()))
    columns = snapshot.metadata().partitionColumns()
    partitioned = [columns.apply(i) for i in range(columns.size())]
    managed = any(key.startswith("delta.") for f in table.fields for key in f.metadata)  # generated, identity
    return (rows.schema.simpleString() == table.simpleString() and not managed
            and partitioned == list(partition_cols))


def _delta_writer(rows: DataFrame, path: str, app_id: str, batch_id: int,
                  partition_cols: Sequence[str]) -> bool:
    writer = rows.write.format("delta").mode("append")
    if partition_cols:
        writer = writer.partitionBy(*partition_cols)
    with idempotent_writes(rows.sparkSession, app_id, batch_id):
        writer.save(path)
    return True
