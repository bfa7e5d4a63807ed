"""`deltaflow kafka|s3|cluster|metastore status` when nothing runs: a line (or JSON) naming where it
looked, exit 1."""

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
    ("metastore", "metastore: nothing answers at thrift://127.0.0.1:{port}",
     {"running": False, "uri": "thrift://127.0.0.1:{port}", "pid": None}),
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


def test_a_metastore_start_on_a_port_another_program_holds_is_one_line(capsys: Any) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = cli(capsys, "metastore", "start", "--port", str(port))
    assert started.returncode == 1
    assert started.stderr == (f"error: DF-SETUP port {port} on 127.0.0.1 is in use by another program "
                              "(stop it, or start the metastore with --port)\n")
