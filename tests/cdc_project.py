"""The customers project the auto CDC tests share, and how they run it and read it back."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from cdc_model import COLUMNS
from deltaflow.pipeline import Pipeline
from deltaflow.runtime.run_plan import RunPlan
from deltaflow.runtime.runner import PipelineRun
from deltaflow.spec import load_spec
from helpers import Project

#: The customer changes dropped as JSON files into ``landing``, as the table ``changes``.
CHANGES = """
import deltaflow as dp

@dp.table
def changes():
    return dp.read_files("landing", schema="customer_id STRING, op STRING, seq BIGINT, name STRING, "
                         "email STRING, tier STRING, city STRING, updated_at TIMESTAMP")
"""

CUSTOMERS = CHANGES + """
dp.create_streaming_table("customers", table_properties={"delta.enableChangeDataFeed": "true"})
dp.create_auto_cdc_flow(target="customers", source="changes", keys=["customer_id"], sequence_by="seq",
                        apply_as_deletes="op = 'DELETE'", except_column_list=["op"])

dp.create_streaming_table("customers_history")
dp.create_auto_cdc_flow(target="customers_history", source="changes", keys=["customer_id"],
                        sequence_by="seq", apply_as_deletes="op = 'DELETE'", except_column_list=["op"],
                        stored_as_scd_type=2, name="history")

@dp.table
def customers_audit():
    return dp.read_changes("customers", stream=True)

@dp.materialized_view
def change_counts():
    return dp.read_changes("customers").groupBy("_change_type").count()
"""


def run(spark, project: Project, plan: RunPlan | None = None) -> PipelineRun:  # type: ignore[no-untyped-def]
    spec = load_spec(project.spec_path)
    pipeline = Pipeline(spec, spark=spark).start("available_now", plan=plan)
    pipeline.finish(threading.Event())
    return pipeline


def rows(project: Project, table: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
    found = project.rows(table, columns)
    return sorted(found, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def history(project: Project) -> list[dict[str, Any]]:
    found = rows(project, "customers_history", [*COLUMNS, "__START_AT", "__END_AT"])
    return sorted(found, key=lambda r: (r["customer_id"], r["__START_AT"]))


def versions(project: Project, table: str) -> int:
    return DeltaTable(project.table(table)).version()


def txns(path: str) -> list[dict[str, Any]]:
    """The (appId, version) transactions recorded in a Delta table's log."""
    found = []
    for commit in sorted(Path(path, "_delta_log").glob("*.json")):
        found += [json.loads(line)["txn"] for line in commit.read_text().splitlines() if '"txn"' in line]
    return found


def graves(project: Project, dataset: str, flow: str) -> dict[int, int]:
    """A CDC flow's tombstones as its batches read them: the highest sequence per key."""
    found: dict[int, int] = {}
    tombstones = DeltaTable(project.layout.checkpoint(dataset, flow, 0).tombstones).to_pyarrow_table()
    for r in tombstones.to_pylist():
        found[r["customer_id"]] = max(found.get(r["customer_id"], r["_df_seq"]), r["_df_seq"])
    return found


def forget_last_commit(checkpoint: Path) -> int:
    """Crash between the sink's commit and the checkpoint's: the last batch will be replayed."""
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    return last
