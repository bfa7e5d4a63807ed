"""A MERGE's target rows narrowed to the batch's keys, for a large target with deletion vectors.

With deletion vectors, Delta's MERGE writes only the rows it changes, but its second pass still joins
every row of the files it touches with the batch, through a shuffle: the batch is the join's preserved
side (its unmatched rows are inserted), so Spark cannot broadcast it. Keys spread at random touch every
file, so each batch shuffles the whole target. :func:`merge_condition` adds a condition on the target's
columns alone to the keys' match: the hash of the row's key is one of the batch's (``xxhash64``, so any
key type and composite keys). Spark evaluates it under the join, before the shuffle, and only about the
batch's rows cross. The condition is implied by the keys' equality, so the MERGE pairs exactly the
same rows, whatever a hash collision lets through.

The hashes are gathered in the JVM (a job over the MERGE's computed source) and the filter is evaluated
on every target row in both of Delta's passes, so it pays only when the target is much larger than the
batch and the batch's keys are few (`docs/benchmarks.md` § growth.py: 10,000 keys 0.77× Delta's MERGE
time into 10M rows, 1.15× into 1M; 30,000 keys into 10M rows 1.3-1.5×). Without deletion vectors it
cannot help: the MERGE copies every row of the files it touches, so the join keeps them all. A batch with more
keys than the target's size allows costs one small job (its hashes, up to the limit).

Examples:
    >>> condition = merge_condition(source, path, ["id"], "t.id = s.id")  # doctest: +SKIP
    >>> DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), condition)  # doctest: +SKIP

"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from deltaflow.runtime.jvm_names import java_class
from deltaflow.sinks.snapshot_prefetch import loaded_snapshot

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: The target's bytes per batch key from which the filter is added. Measured with 25 MB per million rows,
#: Delta's MERGE time with the filter against without: 10,000 keys 1.15× at 1M rows (2.5 KiB per key),
#: 0.91× at 3M, 0.77× at 10M (25 KiB per key); 30,000 keys into 10M rows (8.3 KiB per key), 1.3-1.5×.
BYTES_PER_KEY = 16 * 1024
#: The most keys a filter lists. The condition holds them all, in the plans of both passes, and costs with
#: their number: into 10M rows, 10,100 keys gained, 30,000 cost 1.3-1.5× and 100,000 3.5×.
MAX_KEYS = 15_000


def merge_condition(source: DataFrame, path: str, keys: Sequence[str], match: str) -> str | Column:
    """The MERGE's condition: ``match``, and the batch's key hashes when the target is large enough.

    Args:
        source: The MERGE's computed source (aliased ``s``; the target is ``t``), one row per key.
        path: The target Delta table.
        keys: The key columns.
        match: The keys' match (``t.k = s.k AND ...``).

    """
    from pyspark.sql import functions as F
    from pyspark.sql.classic.column import Column as FromJvm

    most = min(MAX_KEYS, _bytes_with_deletion_vectors(source, path) // BYTES_PER_KEY)
    if most == 0:
        return match
    spark = source.sparkSession
    hashed = source.select(F.xxhash64(*[F.col(f"`{k}`") for k in keys])).limit(most + 1)._jdf
    hashes = getattr(hashed, "as")(java_class(spark, "org.apache.spark.sql.Encoders").LONG()).collectAsList()
    if hashes.size() > most:  # too many keys for the target's size
        return match
    target = F.xxhash64(*[F.col(f"t.`{k}`") for k in keys])
    in_batch = FromJvm(target._jc.isInCollection(hashes))  # type: ignore[operator]  # pyspark's stubs
    return F.expr(match) & in_batch


def _bytes_with_deletion_vectors(source: DataFrame, path: str) -> int:
    """The size of the target's latest known snapshot if it has deletion vectors, else 0."""
    snapshot = loaded_snapshot(source.sparkSession, path)  # the one the prefetch computed
    enabled = snapshot.metadata().configuration().get("delta.enableDeletionVectors")
    return int(snapshot.sizeInBytes()) if enabled.isDefined() and enabled.get() == "true" else 0
