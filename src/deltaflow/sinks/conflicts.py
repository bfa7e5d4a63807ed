"""Retrying a Delta commit that lost to a concurrent one (a compaction, another writer).

Delta's optimistic concurrency lets two writers work at once and fails the second commit when what the
winner did touches what the loser read: a MERGE that read files a compaction just rewrote, a compaction
whose files a MERGE just replaced. Each deltaflow write is idempotent (its micro-batch's ``txnAppId`` /
``txnVersion``, see :mod:`deltaflow.sinks.idempotent`), so the loser is simply run again on the new
snapshot: what it already committed is skipped, the rest is written once.

Examples:
    >>> compact = lambda: builder.executeCompaction().collect()  # doctest: +SKIP
    >>> metrics = retry_conflicts(compact, "optimize 'silver'")  # doctest: +SKIP

"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from deltaflow.errors import SinkError, first_line

T = TypeVar("T")

ATTEMPTS = 8


def retry_conflicts(action: Callable[[], T], what: str, attempts: int = ATTEMPTS) -> T:
    """Run ``action``; run it again (up to ``attempts`` times in all) while it loses a commit race.

    Raises:
        SinkError: It lost ``attempts`` times in a row, naming ``what`` and the last conflict.

    """
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except Exception as exc:
            conflict = as_conflict(exc)
            if conflict is None:
                raise
            if attempt == attempts:
                raise SinkError(f"{what}: lost {attempts} commits in a row to concurrent writers: "
                                f"{first_line(conflict)}") from exc
            time.sleep(random.uniform(0, min(0.05 * 2 ** attempt, 5.0)))  # jittered: the winner moves on
    raise AssertionError("unreachable")


def as_conflict(error: Exception) -> Exception | None:
    """``error`` as Delta's Python exception for a lost commit race, or None when it is something else.

    A commit deltaflow makes through py4j itself (``txn.commit``: :mod:`deltaflow.sinks.txn_append`)
    raises the JVM's exception as it is; pyspark converts only those of its own calls.
    """
    import delta.exceptions as conflict
    from py4j.protocol import Py4JJavaError
    from pyspark.errors.exceptions.captured import convert_exception

    # Delta's Python classes for its conflicts share no base class: name each.
    conflicts = (conflict.DeltaConcurrentModificationException, conflict.ConcurrentWriteException,
                 conflict.MetadataChangedException, conflict.ProtocolChangedException,
                 conflict.ConcurrentAppendException, conflict.ConcurrentDeleteReadException,
                 conflict.ConcurrentDeleteDeleteException, conflict.ConcurrentTransactionException)
    if isinstance(error, Py4JJavaError):
        converted: Exception = convert_exception(error.java_exception)  # delta.exceptions adds its own
        return converted if isinstance(converted, conflicts) else None
    return error if isinstance(error, conflicts) else None
