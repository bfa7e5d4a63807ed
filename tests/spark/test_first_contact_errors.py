"""An analysis error is deltaflow's one line on the terminal (issue 77, problem 1): pyspark's own JSON log
record of the error's query context and its stack trace go to the run's log, not to stderr.

``capfd`` reads the process's file descriptors, so a record pyspark's logger wrote to the real stderr
(its handler holds the stream it was created with) would be seen here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import cli

BROKEN = '''
import deltaflow as dp
from pyspark.sql import functions as F


@dp.table
def bronze():
    return spark.readStream.format("rate").load()


@dp.table
def silver():
    return spark.readStream.table("bronze").where(F.col("corrupt").isNull())
'''


def test_an_unknown_column_is_one_line_and_the_details_are_in_the_run_log(
        spark: Any, make_project: Any, capfd: Any) -> None:
    project = make_project(BROKEN)
    done = cli(capfd, "dry-run", "--spec", str(project.spec_path))
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: DF-GRAPH ") and "UNRESOLVED_COLUMN" in lines[0]
    assert "`corrupt`" in lines[0]
    assert '"logger"' not in done.stderr and "Traceback" not in done.stderr
    log = lines[0].rsplit("the full error is in ", 1)[1].rstrip(")")
    text = Path(log).read_text()
    assert "DataFrameQueryContextLogger" in text and "Traceback" in text  # pyspark's record, then the trace
    assert not project.storage.exists()  # dry-run writes nothing into the storage
