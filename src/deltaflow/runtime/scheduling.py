"""Which flow's tasks run first when the cores are busy: downstream first.

At trigger 0 every query of a pipeline keeps submitting work, and Spark's default (FIFO) scheduler gives a
free core to whichever job was submitted first. A gold batch then waits behind bronze and silver tasks at
each of its stages, though what a user waits for is gold. deltaflow starts Spark with its FAIR scheduler
and the pools of ``jvm/scheduler-pools.xml``, and starts each query in the pool of its flow's depth (0 for
a flow reading no table of the pipeline, 1 + the deepest table it reads otherwise): a deeper query's
pending tasks take the next free core, ingest takes what is left. Only the order of tasks changes, never
what a batch reads or writes. A session started with another scheduler mode or allocation file (the
spec's ``configuration``) keeps it, and its queries start in no deltaflow pool.

Examples:
    >>> with scheduler_pool(spark, 2):  # doctest: +SKIP
    ...     query = df.writeStream.foreachBatch(write).start()  # its batches' jobs run in pool depth 2

"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from deltaflow.resolve.resolved import ResolvedGraph

POOLS_FILE = str(resources.files("deltaflow.runtime") / "jvm" / "scheduler-pools.xml")
#: The Spark settings that turn the pools on (deltaflow's defaults; a spec's configuration wins).
SETTINGS = {"spark.scheduler.mode": "FAIR", "spark.scheduler.allocation.file": POOLS_FILE}
_DEEPEST = 7  # the deepest pool in the file; deeper flows share it
_POOL = "spark.scheduler.pool"


def flow_depths(resolved: ResolvedGraph) -> dict[str, int]:
    """Each flow's depth: 0 when it reads no stored dataset of the pipeline, else 1 + the deepest it reads.

    A dataset's depth is the deepest of the flows into it.

    Examples:
        >>> flow_depths(resolver)  # doctest: +SKIP
        {'bronze': 0, 'silver': 1, 'gold': 2}

    """
    datasets: dict[str, int] = {}
    flows: dict[str, int] = {}
    for dataset in resolved.order():
        for flow in resolved.graph.flows_into(dataset):
            inputs = resolved.flow_stored_inputs(flow.name)
            flows[flow.name] = 1 + max((datasets.get(d, 0) for d in inputs), default=-1)
        datasets[dataset] = max((flows[f.name] for f in resolved.graph.flows_into(dataset)), default=0)
    return flows


@contextmanager
def scheduler_pool(spark: SparkSession, depth: int) -> Iterator[None]:
    """Start this block's queries in the pool of ``depth`` (their thread inherits it), if the pools are on."""
    context = spark.sparkContext
    conf = context.getConf()
    if (conf.get("spark.scheduler.mode", "FIFO").upper() != "FAIR"
            or conf.get("spark.scheduler.allocation.file", "") != POOLS_FILE):
        yield
        return
    before = context.getLocalProperty(_POOL)
    context.setLocalProperty(_POOL, f"deltaflow-depth-{min(depth, _DEEPEST)}")
    try:
        yield
    finally:
        context.setLocalProperty(_POOL, before)  # type: ignore[arg-type]  # None removes it
