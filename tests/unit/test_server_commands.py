"""`deltaflow kafka|s3|cluster status` when nothing runs: a line (or JSON) naming where it looked, exit 1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers import cli, free_port


@pytest.fixture(autouse=True)
def own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DELTAFLOW_HOME", str(tmp_path))  # no pid file of a server started elsewhere


@pytest.mark.parametrize(("command", "line", "fields"), [
    ("kafka", "kafka: not running (state in {home}/kafka)", {"running": False, "bootstrap": None}),
    ("s3", "s3: not running", {"running": False, "endpoint": "http://127.0.0.1:{port}"}),
    ("cluster", "cluster: no master answers at spark://127.0.0.1:{port}",
     {"running": False, "master": "spark://127.0.0.1:{port}", "workers": 0}),
])
def test_status_of_a_server_that_is_not_running_is_one_line_and_exit_1(
        capsys: Any, tmp_path: Path, command: str, line: str, fields: dict[str, Any]) -> None:
    port = free_port()
    shown = cli(capsys, command, "status", "--port", str(port))
    assert (shown.returncode, shown.stdout) == (1, line.format(home=tmp_path, port=port) + "\n")
    as_json = cli(capsys, command, "status", "--port", str(port), "--json")
    assert as_json.returncode == 1
    answer = json.loads(as_json.stdout)
    assert {k: answer[k] for k in fields} == {
        k: v.format(port=port) if isinstance(v, str) else v for k, v in fields.items()}
