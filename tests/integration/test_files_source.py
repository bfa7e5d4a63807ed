"""A JSON drop folder -> bronze: every line lands, malformed ones kept whole, never silent nulls."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

DEFS = """
import deltaflow as dp

@dp.table
def bronze_orders():
    return dp.read_files("landing", schema="order_id STRING, amount DOUBLE")
"""


def test_malformed_json_lines_are_kept_raw_with_their_file(spark, make_project) -> None:
    project = make_project(DEFS)
    landing = project.root / "landing"
    landing.mkdir()
    (landing / "a.json").write_text('{"order_id": "o1", "amount": 10.5}\n'
                                    '{"order_id": "o2", "amount": "ten"}\n')
    project.run(spark)
    (landing / "b.json").write_text('not json at all\n{"order_id": "o3", "amount": 3}\n')
    project.run(spark)

    rows = DeltaTable(project.table("bronze_orders")).to_pyarrow_table().to_pylist()
    assert len(rows) == 4
    by_file: dict[str, list[dict]] = {}
    for row in rows:
        by_file.setdefault(row["source_file"].rsplit("/", 1)[-1], []).append(row)
    assert sorted(by_file) == ["a.json", "b.json"]
    good = {r["order_id"]: r["amount"] for r in rows if r["_corrupt_record"] is None}
    assert good == {"o1": 10.5, "o3": 3.0}
    corrupt = sorted(r["_corrupt_record"] for r in rows if r["_corrupt_record"] is not None)
    assert corrupt == ['not json at all', '{"order_id": "o2", "amount": "ten"}']


def test_missing_drop_folder_is_a_one_line_error(spark, make_project) -> None:
    from deltaflow.errors import SourceError

    project = make_project(DEFS)
    with pytest.raises(SourceError) as info:
        project.run(spark)
    assert "drop folder does not exist" in str(info.value) and "landing" in str(info.value)
