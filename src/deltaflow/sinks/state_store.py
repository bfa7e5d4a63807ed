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

Chosen when a query starts, for that query alone: Spark records the provider in the checkpoint, so a query
restarted from an existing checkpoint keeps the store it began with. A session that names a provider
itself (the spec's ``configuration``, a notebook's session) keeps its own.

Example:
    >>> with state_store(spark):  # doctest: +SKIP
    ...     query = df.writeStream.foreachBatch(write).start()

"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROVIDER = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"


@contextmanager
def state_store(spark: SparkSession) -> Iterator[None]:
    """Start the queries of this block on RocksDB, unless the session names a state store of its own."""
    conf = spark.conf
    if conf.get(PROVIDER, None) is not None:
        yield
        return
    own_changelog = conf.get(CHANGELOG, None) is not None
    conf.set(PROVIDER, ROCKSDB)
    if not own_changelog:
        conf.set(CHANGELOG, "true")
    try:
        yield
    finally:
        conf.unset(PROVIDER)
        if not own_changelog:
            conf.unset(CHANGELOG)
