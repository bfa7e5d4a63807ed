"""An SDP project of this suite's own (``tests/spark/sdp_rides``, a ride-hailing pipeline: streaming tables
over JSON folders, two append flows into one table, Python and SQL temporary views, materialized views with
joins, ``partition_cols`` and ``PARTITIONED BY``, ``TBLPROPERTIES``, ``spark.sql(...)`` inside a view,
configuration read with ``spark.conf.get`` at module level, a SQL streaming table with a schema and a SQL
flow) run by ``spark-pipelines`` and by ``deltaflow run`` on identical copies, twice, every table compared:
rows, columns and types, partitioning, properties and comments (issue 76)."""

from __future__ import annotations

import json
import random
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from deltaflow.commands.tables import query_rows
from deltaflow.dev.spark_pipelines import run_spark_pipelines, spark_pipelines_table
from deltaflow.pipeline import Pipeline
from helpers import cli, cli_env

RIDES = Path(__file__).parent / "sdp_rides"
TABLES = ("trips_raw", "drivers", "trip_events", "driver_earnings", "tips_by_city", "long_trips", "audit")


def copy(root: Path) -> Path:
    shutil.copytree(RIDES, root)
    for folder in ("trips", "drivers"):
        (root / "landing" / folder).mkdir(parents=True)
    (root / "spark-pipeline.yml").write_text(
        f"name: rides\nstorage: file://{root / 'storage'}\nconfiguration:\n"
        f"  rides.landing: {root / 'landing'}\n  rides.min_fare: '3.0'\n"
        "libraries:\n  - glob:\n      include: transformations/**\n")
    return root


def drop(roots: tuple[Path, ...], round_: int, rng: random.Random) -> None:
    """The same new trips (and, in the second round, a driver's new rating) in both copies."""
    trips = [{"trip_id": f"t{round_}-{i}", "driver_id": f"d{rng.randrange(5)}",
              "city": rng.choice(["Oslo", "Lima", "Pune"]),
              "fare": None if i % 17 == 0 else round(rng.uniform(1, 60), 2),
              "tip": None if i % 3 == 0 else round(rng.uniform(0, 8), 2),
              "started_at": f"2026-11-{1 + i % 3:02d}T{i % 24:02d}:15:00Z"} for i in range(60)]
    drivers = [{"driver_id": f"d{i}", "name": f"driver {i}", "rating": 4.0 + i * 0.2 - round_ * 0.3}
               for i in range(5)]
    for root in roots:
        (root / "landing" / "trips" / f"{round_}.json").write_text("\n".join(map(json.dumps, trips)) + "\n")
        (root / "landing" / "drivers" / "all.json").write_text("\n".join(map(json.dumps, drivers)) + "\n")


def described(path: str) -> dict[str, Any]:
    delta = DeltaTable(path)
    meta = delta.metadata()
    columns = [(f.name, str(f.type)) for f in delta.schema().fields]
    found = query_rows(delta, [c for c, _ in columns])
    rows = sorted(json.dumps(r, default=str, sort_keys=True) for r in found)
    return {"columns": columns, "partitioning": meta.partition_columns, "comment": meta.description or None,
            "properties": dict(meta.configuration), "rows": rows}


def test_an_sdp_project_of_our_own_gives_sdps_tables_table_for_table_over_two_runs(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, capsys, monkeypatch) -> None:
    ours, theirs = copy(tmp_path / "ours"), copy(tmp_path / "theirs")
    work = tmp_path / "sdp"
    monkeypatch.setenv("JDK_JAVA_OPTIONS", cli_env()["JDK_JAVA_OPTIONS"])  # SDP's driver as the tests' own
    rng = random.Random(76)
    for round_ in range(2):
        drop((ours, theirs), round_, rng)
        with ThreadPoolExecutor(1) as sdp:  # SDP in a process of its own while deltaflow runs in this one
            sdp_run = sdp.submit(run_spark_pipelines, theirs / "spark-pipeline.yml", work)
            ran = cli(capsys, "run", "--spec", str(ours))
            done = sdp_run.result()
        assert ran.returncode == 0, ran.stderr
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        layout = Pipeline.load(ours).layout
        for name in TABLES:
            mine, sdps = described(layout.table(name)), described(spark_pipelines_table(work, name))
            assert mine["rows"], (round_, name)
            for aspect in mine:
                assert mine[aspect] == sdps[aspect], (round_, name, aspect)
    assert described(layout.table("tips_by_city"))["partitioning"] == ["city"]
    assert described(layout.table("trips_raw"))["properties"]["quality"] == "bronze"
