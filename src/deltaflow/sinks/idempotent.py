"""Idempotent Delta writes from a micro-batch: each batch's writes commit at most once per table.

Delta records a ``(txnAppId, txnVersion)`` pair in a table's log with each commit that carries one, and
skips a later write with the same app id and a version not above the recorded one. deltaflow takes the
app id from the flow's checkpoint identity (:meth:`~deltaflow.storage.layout.FlowCheckpoint.app_id`: its
dataset, flow, generation and query id, so a full refresh, which starts a new checkpoint, gets a new one)
and the version from the batch id. A batch replayed after a crash between its
Delta commit and its checkpoint commit therefore writes nothing.

The pair is set as session configuration on the batch's own session: Spark runs every streaming query in
a clone of the session it was started from, so concurrent flows never see each other's pair, and the
setting covers every kind of Delta write (``DataFrameWriter``, ``DeltaTable.merge``, SQL DML). This is
the one way deltaflow stamps its writes: appends, views, auto CDC, foreach-batch sinks, replays.

Examples:
    >>> app_id = flow_app_id(layout, layout.checkpoint("customers", "customers"))  # doctest: +SKIP
    >>> with idempotent_writes(batch_df.sparkSession, app_id, batch_id):  # doctest: +SKIP
    ...     batch_df.write.format("delta").mode("append").save(path)

"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from deltaflow.storage import FlowCheckpoint, StorageLayout

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"


def flow_app_id(layout: StorageLayout, checkpoint: FlowCheckpoint) -> str:
    """``deltaflow:<dataset>/<flow>/<generation>:<query id>`` for the flow checkpointed at ``checkpoint``.

    Call it once the flow's query has started (the query id is in the checkpoint's ``metadata`` file).
    """
    return checkpoint.app_id(layout.query_id(checkpoint))


@contextmanager
def idempotent_writes(session: SparkSession, app_id: str, batch_id: int) -> Iterator[None]:
    """Make every Delta write on ``session`` inside the block carry ``(app_id, batch_id)``.

    Blocks nest: the pair set before the block is set again after it (a batch writing several flows'
    tables stamps each write with its own flow's pair).
    """
    before = {key: session.conf.get(key, None) for key in (TXN_APP_ID, TXN_VERSION)}
    session.conf.set(TXN_APP_ID, app_id)
    session.conf.set(TXN_VERSION, str(batch_id))
    try:
        yield
    finally:
        _restore(session, before)


def session_stamp(session: SparkSession) -> tuple[str, int]:
    """The ``(app id, version)`` an enclosing :func:`idempotent_writes` block set on ``session``.

    For writers that stamp their commits themselves (:func:`deltaflow.sinks.txn_append.append_once`).

    Examples:
        >>> with idempotent_writes(session, "deltaflow:silver/silver/0:3f2a", 7):  # doctest: +SKIP
        ...     session_stamp(session)
        ('deltaflow:silver/silver/0:3f2a', 7)

    """
    app_id, version = (session.conf.get(key, None) for key in (TXN_APP_ID, TXN_VERSION))
    if app_id is None or version is None:
        raise RuntimeError("session_stamp outside an idempotent_writes block")
    return app_id, int(version)


@contextmanager
def unstamped(session: SparkSession) -> Iterator[None]:
    """Write without the batch's pair inside an :func:`idempotent_writes` block.

    For a table whose readers are indifferent to a batch written twice (its rows are keyed and read as
    the maximum per key, say): an unstamped commit spares Delta the reconstruction of the table's
    transactions, a Spark job over its log, that checking a stamp takes.

    Examples:
        >>> with idempotent_writes(session, app_id, batch_id):  # doctest: +SKIP
        ...     merge.execute()  # stamped
        ...     with unstamped(session):
        ...         deletes.write.format("delta").mode("append").save(tombstones)

    """
    pair = {key: session.conf.get(key, None) for key in (TXN_APP_ID, TXN_VERSION)}
    for key in pair:
        session.conf.unset(key)
    try:
        yield
    finally:
        _restore(session, pair)


def _restore(session: SparkSession, pair: dict[str, str | None]) -> None:
    for key, value in pair.items():
        if value is None:
            session.conf.unset(key)
        else:
            session.conf.set(key, value)
