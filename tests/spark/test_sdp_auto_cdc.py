"""SDP's auto CDC, as SDP 4.3 spells it, runs into Delta (issue 76): ``dp.create_auto_cdc_flow`` from
``pyspark.pipelines`` with SCD type 2 and tracked history (which pyspark 4.2's own function refuses), and
the SQL form ``CREATE FLOW ... AS AUTO CDC INTO ...``. Each target equals, row for row, the one deltaflow's
own ``create_auto_cdc_flow`` writes from the same events, over two runs with late and out-of-order events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from deltaflow.pipeline import Pipeline

SDP_PY = """\
from pyspark import pipelines as dp
from pyspark.sql import functions as F


@dp.table
def customer_events():
    schema = "id STRING, name STRING, tier STRING, op STRING, ts BIGINT"
    return spark.readStream.format("json").schema(schema).load(spark.conf.get("landing"))


dp.create_streaming_table("history")
dp.create_auto_cdc_flow(target="history", source="customer_events", keys=["id"], sequence_by=F.col("ts"),
                        apply_as_deletes=F.expr("op = 'DELETE'"), except_column_list=["op"],
                        stored_as_scd_type=2, track_history_column_list=["tier"])
"""
SDP_SQL = """\
CREATE STREAMING TABLE latest;

CREATE FLOW latest_cdc AS AUTO CDC INTO latest
  FROM STREAM(customer_events)
  KEYS (id)
  APPLY AS DELETE WHEN op = 'DELETE'
  SEQUENCE BY ts
  COLUMNS * EXCEPT (op)
  STORED AS SCD TYPE 1;
"""
DELTAFLOW = """\
import deltaflow as dp


@dp.table
def customer_events():  # SDP's reader, so that the events' columns are the same
    schema = "id STRING, name STRING, tier STRING, op STRING, ts BIGINT"
    return spark.readStream.format("json").schema(schema).load(dp.parameter("landing"))


dp.create_streaming_table("history")
dp.create_auto_cdc_flow(target="history", source="customer_events", keys=["id"], sequence_by="ts",
                        apply_as_deletes="op = 'DELETE'", except_column_list=["op"], stored_as_scd_type=2,
                        track_history_column_list=["tier"])
dp.create_streaming_table("latest")
dp.create_auto_cdc_flow(target="latest", source="customer_events", keys=["id"], sequence_by="ts",
                        apply_as_deletes="op = 'DELETE'", except_column_list=["op"], name="latest_cdc")
"""

ROUNDS = [
    [{"id": "c1", "name": "Ann", "tier": "silver", "op": "UPSERT", "ts": 1},
     {"id": "c2", "name": "Bob", "tier": "gold", "op": "UPSERT", "ts": 1},
     {"id": "c1", "name": "Ann B", "tier": "silver", "op": "UPSERT", "ts": 2},  # not tracked: in place
     {"id": "c3", "name": "Cy", "tier": "bronze", "op": "UPSERT", "ts": 1}],
    [{"id": "c1", "name": "Ann B", "tier": "gold", "op": "UPSERT", "ts": 4},  # tracked: a new version
     {"id": "c2", "name": "Bob", "tier": "gold", "op": "DELETE", "ts": 3},
     {"id": "c3", "name": "Cy", "tier": "silver", "op": "UPSERT", "ts": 3},
     {"id": "c3", "name": "Cy old", "tier": "bronze", "op": "UPSERT", "ts": 0},  # late: older than the row
     {"id": "c4", "name": "Di", "tier": "gold", "op": "UPSERT", "ts": 2}],
]


def project(root: Path, files: dict[str, str], spec_name: str) -> Path:
    (root / "transformations").mkdir(parents=True)
    for name, text in files.items():
        (root / "transformations" / name).write_text(text)
    (root / "landing").mkdir()
    (root / spec_name).write_text(f"name: customers\nstorage: {root / 'storage'}\nconfiguration:\n"
                                  f"  landing: {root / 'landing'}\nlibraries: [transformations/**]\n")
    return root


def table(pipeline: Pipeline, name: str) -> list[dict[str, Any]]:
    result = pipeline.sql(f"SELECT * FROM {name}")
    return sorted(result.as_dicts(), key=lambda r: json.dumps(r, default=str, sort_keys=True))


def test_sdp_auto_cdc_in_python_and_sql_writes_what_deltaflows_own_writes(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sdp = project(tmp_path / "sdp", {"cdc.py": SDP_PY, "latest.sql": SDP_SQL}, "spark-pipeline.yml")
    own = project(tmp_path / "own", {"cdc.py": DELTAFLOW}, "deltaflow.yml")
    for round_, events in enumerate(ROUNDS):
        for root in (sdp, own):
            (root / "landing" / f"{round_}.json").write_text("\n".join(json.dumps(e) for e in events) + "\n")
        pipelines = [Pipeline.load(root, spark=spark) for root in (sdp, own)]
        for pipeline in pipelines:
            pipeline.run("available_now")
        for name in ("history", "latest"):
            assert table(pipelines[0], name) == table(pipelines[1], name), (round_, name)
    latest = {r["id"]: (r["name"], r["tier"]) for r in table(pipelines[0], "latest")}
    assert latest == {"c1": ("Ann B", "gold"), "c3": ("Cy", "silver"), "c4": ("Di", "gold")}
    versions = [(r["id"], r["tier"]) for r in table(pipelines[0], "history") if r["id"] == "c1"]
    assert sorted(versions) == [("c1", "gold"), ("c1", "silver")]  # the name change did not add one
