"""A rewind whose flows would read their input again from a version not written yet (issue 77, found while
trying the starter): nothing is to be read again, so it is not refused as a version the log lost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from deltaflow.commands.init import init_project
from deltaflow.pipeline import Pipeline
from helpers import cli


def test_rewinding_to_the_first_batch_of_a_pipeline_that_ran_once_works_and_loses_nothing(
        spark: Any, tmp_path: Path, capsys: Any) -> None:
    init_project(tmp_path / "shop")
    spec = str(tmp_path / "shop")
    assert cli(capsys, "run", "--available-now", "--spec", spec).returncode == 0
    layout = Pipeline.load(spec).layout

    def silver() -> list[str]:
        rows = DeltaTable(layout.table("silver_events")).to_pyarrow_table().to_pylist()
        return sorted(r["event_id"] for r in rows)

    before = silver()
    rewound = cli(capsys, "rewind", "silver_events", "--to-version", "1", "--spec", spec)
    assert rewound.returncode == 0, rewound.stderr  # bronze's next version is not written yet: nothing lost
    assert "silver_events: rewound to version 1" in rewound.stdout
    assert cli(capsys, "run", "--available-now", "--spec", spec).returncode == 0
    assert silver() == before == ["e1", "e2", "e3", "e5"]  # each event once, none lost
