"""A failed flow prints one line to the terminal, with where its full error is; the stacks go to the log."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from helpers import Project, cli_env

FAILS = """
import deltaflow as dp

@dp.table
def bronze():
    return dp.read_files("landing", format="json", schema="id STRING")

@dp.table
def checked():
    return spark.readStream.table("bronze").selectExpr("id", "raise_error(concat('bad id ', id)) AS x")

@dp.materialized_view
def summary():
    return spark.read.table("checked").groupBy().count()
"""


def test_a_failed_flow_prints_one_line_and_leaves_its_stack_in_the_log(tmp_path: Path) -> None:
    project = Project(tmp_path / "p", FAILS)
    project.drop("0.json", [{"id": "e1"}])
    command = [sys.executable, "-m", "deltaflow", "run", "--available-now", "--quiet", "--spec",
               str(project.spec_path)]
    done = subprocess.run(command, capture_output=True, text=True, env=cli_env(), timeout=300)
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert "DF-FLOW" in errors[0] and "'checked'" in errors[0] and "bad id e1" in errors[0], errors[0]
    named = re.search(r"the full error is in (\S+)\)", errors[0])
    assert named, errors[0]
    log = named.group(1)  # the run's own log, under the pipeline's storage
    assert Path(log).parent == Path(project.layout.run_logs) and Path(log).name.endswith(".log"), log
    assert "\tat " not in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert len(done.stderr.splitlines()) <= 6, done.stderr  # the run's header, the flows' lines, the error
    assert "\nsummary: skipped: upstream 'checked' failed\n" in done.stderr, done.stderr  # not run on nothing
    assert "; skipped downstream: 'summary'" in errors[0], errors[0]
    text = Path(log).read_text()
    assert "bad id e1" in text and "\tat org.apache.spark" in text, text[-3000:]
    assert "Traceback (most recent call last)" in text and "FlowError" in text, text[-3000:]  # and Python's


def test_table_properties_delta_refuses_are_one_line_naming_the_table(tmp_path: Path) -> None:
    project = Project(tmp_path / "p", FAILS, spec_extra="table_properties:\n"
                      "  delta.logRetentionDuration: interval 30 minutes\n"
                      "  delta.deletedFileRetentionDuration: interval 1 hour\n")
    project.drop("0.json", [{"id": "e1"}])
    command = [sys.executable, "-m", "deltaflow", "run", "--available-now", "--quiet", "--spec",
               str(project.spec_path)]
    done = subprocess.run(command, capture_output=True, text=True, env=cli_env(), timeout=300)
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "DF-CONFIG" in errors[0] and "table 'bronze'" in errors[0], errors[0]
    assert "delta.logRetentionDuration" in errors[0] and "defs.py:4" in errors[0], errors[0]
