"""Where a streaming table's stateful query keeps its state: RocksDB, with changelog checkpointing.

Spark's default state store keeps each partition's state in a hash map on the heap and copies the whole
map at every micro-batch, so a batch costs what is stored, not what changed (a dedup's ten minutes of
event ids, a view's distinct keys), and the copies feed the garbage collector. RocksDB keeps the state off
the heap; with changelog checkpointing a batch writes only its changes. On the clickstream pipeline at the
seed's triggers (``docs/benchmarks.md``) the driver's CPU stayed flat with RocksDB while the default store's
grew with the dedup's state, its collector taking a third of a core after six minutes. A materialized
view keeps the default store: at a view's state (gold's first hours) RocksDB made the incremental batch
slower (``gold_batches.py``'s last steps: 1.90 s against 0.95 s on the default store). A view with a
lateness (``dp.by_window(..., lateness=...)``) is the exception: it is meant to run for good, and its state
is every distinct value of each recent window (the clickstream's hour: about five million (product,
user) pairs at 3,300 events/s), which the default store would copy on the heap at every batch.

deltaflow also chooses some of Spark's RocksDB settings (:data:`TUNING`) and, for a view with a lateness,
skips the batches Spark runs without new rows only to drop old state (the next batch with rows drops it;
the view's rows do not change either way). ``benchmarks/view_state.py`` measures the difference on a view
that runs for hours.

Chosen when a query starts, for that query alone: Spark records the provider in the checkpoint, so a query
restarted from an existing checkpoint keeps the store it began with. A session that names a provider
itself (the spec's ``configuration``, a notebook's session) keeps its own, and so does a session that
names any of the settings.

Examples:
    >>> with state_store(spark):  # doctest: +SKIP
    ...     query = df.writeStream.foreachBatch(write).start()

"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from deltaflow.runtime.session import session_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROVIDER = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"
_STORE = "spark.sql.streaming.stateStore."
_ROCKSDB = f"{_STORE}rocksdb."
#: RocksDB settings deltaflow starts its queries with. Changelog checkpointing: a batch writes its changes,
#: not the state. No running count of the stored rows: Spark would read each key before writing or deleting
#: it, and a view drops a whole window's pairs at once. The store's memory bounded and shared by the
#: executor's stores: one cache holds a view's recent windows, where each store's own 8 MB cache is read
#: again from its files by every batch's scan for old keys. A snapshot at every commit (its files hard
#: links, uploaded by the executor's maintenance every few seconds): a query that starts again loads the
#: last snapshot. With Spark's settings (a snapshot every 10 versions, uploaded every minute) it replays
#: every change since the last one, the first batch's whole input among them: a gold batch over 10M stored
#: pairs, its query started again, took 21-27 s, most of it replaying, and 3.1-5.4 s with these
#: (``docs/benchmarks.md``, growth).
TUNING = {f"{_ROCKSDB}changelogCheckpointing.enabled": "true",
          f"{_ROCKSDB}trackTotalNumberOfRows": "false",
          f"{_ROCKSDB}boundedMemoryUsage": "true",
          f"{_STORE}minDeltasForSnapshot": "1",
          f"{_STORE}maintenanceInterval": "5s"}


@contextmanager
def state_store(spark: SparkSession, *, empty_batches: bool = True) -> Iterator[None]:
    """Start the queries of this block on RocksDB, unless the session names a state store of its own.

    Args:
        spark: The session.
        empty_batches: Let Spark run a batch without new rows when old state can be dropped.

    """
    own_store = spark.conf.get(PROVIDER, None) is not None
    settings = {} if own_store else {PROVIDER: ROCKSDB, **TUNING}
    if not empty_batches:
        settings[NO_DATA_BATCHES] = "false"
    with session_settings(spark, {k: v for k, v in settings.items() if spark.conf.get(k, None) is None}):
        yield
