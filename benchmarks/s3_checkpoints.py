"""Streaming checkpoints on S3: Spark's own checkpoint file manager against deltaflow's, A/B in one session.

Spark writes each checkpoint file as a temporary file renamed to its name (on S3: a PUT, then a copy and
a delete, with S3A's checks of both names); ``io.deltaflow.storage.ConditionalCheckpointFileManager`` PUTs
it at its name (``If-None-Match: *`` for a batch's files). One query, JSON files into a Delta table on the
local S3 server, one file per micro-batch (``--files`` of them), ``availableNow``; the manager is the
session's ``spark.sql.streaming.checkpointFileManagerClass``, set before each query. Each round runs both,
alternating which goes first; a warm-up round of both is not counted. Printed per contestant: the median
micro-batch (Spark's ``triggerExecution``) and the checkpoint's two log writes (``walCommit`` +
``commitOffsets``), medians of the rounds' medians with their spread. A query's first two batches are left
out of its median (they plan and compile what the rest reuse).

moto is an in-memory Python server on loopback: the figures show the requests saved, not AWS's latency,
which makes each saved request cost more there.

    .venv/bin/python benchmarks/s3_checkpoints.py [--rounds 6] [--files 12]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import uuid
from pathlib import Path
from typing import Any

from bronze_ingest import free_port
from deltaflow.dev.s3_server import ACCESS_KEY, SECRET_KEY, LocalS3
from deltaflow.runtime.session import build_session
from deltaflow.spec import S3Spec
from deltaflow.storage.s3 import hadoop_conf

MANAGERS = {
    "Spark's (temporary file + rename)":
        "org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager",
    "deltaflow's (one PUT)": "io.deltaflow.storage.ConditionalCheckpointFileManager",
}


def one_query(spark: Any, landing: Path, manager: str) -> tuple[float, float]:
    """Median batch and checkpoint-log time (ms) of one query through every file of ``landing``."""
    spark.conf.set("spark.sql.streaming.checkpointFileManagerClass", manager)
    root = f"s3a://lake/{uuid.uuid4().hex[:12]}"
    query = (spark.readStream.schema("id STRING, n INT").option("maxFilesPerTrigger", 1).json(str(landing))
             .writeStream.format("delta").option("checkpointLocation", f"{root}/_checkpoint")
             .trigger(availableNow=True).start(f"{root}/table"))
    query.awaitTermination()
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0][2:]

    def median(*parts: str) -> float:
        return statistics.median(sum(b["durationMs"].get(p, 0) for p in parts) for b in batches)

    return median("triggerExecution"), median("walCommit", "commitOffsets")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="counted rounds, after one warm-up")
    parser.add_argument("--files", type=int, default=12, help="files, one micro-batch each")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="deltaflow-s3-checkpoints-"))
    landing = tmp / "landing"
    landing.mkdir()
    for i in range(args.files):
        rows = (json.dumps({"id": f"{i}-{j}", "n": j}) for j in range(100))
        (landing / f"{i:04d}.json").write_text("\n".join(rows))
    server = LocalS3(port=free_port(), state_dir=tmp / "s3")
    endpoint = server.start(["lake"])
    s3 = S3Spec(endpoint=endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY, path_style=True)
    spark = build_session(extra={**hadoop_conf(s3), "spark.sql.warehouse.dir": str(tmp / "warehouse")})
    try:
        names = list(MANAGERS)
        for name in names:  # warm-up
            one_query(spark, landing, MANAGERS[name])
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
        for round_no in range(args.rounds):
            for name in names if round_no % 2 == 0 else names[::-1]:
                results[name].append(one_query(spark, landing, MANAGERS[name]))
    finally:
        spark.stop()
        server.stop()
    for name, rounds in results.items():
        batch, logs = [r[0] for r in rounds], [r[1] for r in rounds]
        print(f"{name}: micro-batch {statistics.median(batch):.0f} ms ({min(batch):.0f}-{max(batch):.0f}), "
              f"walCommit + commitOffsets {statistics.median(logs):.0f} ms ({min(logs):.0f}-{max(logs):.0f})")


if __name__ == "__main__":
    main()
