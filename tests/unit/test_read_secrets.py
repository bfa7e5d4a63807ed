"""A verb that only reads the storage needs no secret but the storage's (issue 40, problem 4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deltaflow.dev.sample_log import write_batches
from deltaflow.errors import ConfigError
from deltaflow.pipeline import Pipeline
from helpers import cli

SPEC = """name: bench
storage: {storage}
libraries: [transformations/*.py]
configuration:
  spark.hadoop.fs.s3a.secret.key: ${{LOOK_S3A_SECRET}}
kafka:
  bootstrap_servers: 127.0.0.1:1
  options: {{sasl.jaas.config: '${{LOOK_KAFKA_JAAS}}'}}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("LOOK_S3A_SECRET", "LOOK_KAFKA_JAAS", "LOOK_STORAGE"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "deltaflow.yml").write_text(SPEC.format(storage="./storage"))
    write_batches(Pipeline.load(tmp_path, reading=True).layout, batches=9, appends=3)
    return tmp_path


def test_status_reads_without_the_secrets_it_does_not_use(project: Path, capsys: Any) -> None:
    shown = cli(capsys, "status", "--json", "--spec", str(project))
    assert shown.returncode == 0, shown.stderr
    flows = [json.loads(line) for line in shown.stdout.splitlines()]
    assert sorted(f["flow"] for f in flows) == ["bronze", "gold", "silver"]
    assert all(f["rows_total"] == 3_000 for f in flows), flows
    text = cli(capsys, "status", "--spec", str(project))
    assert text.returncode == 0, text.stderr
    assert "LOOK_KAFKA_JAAS is not set (kafka.options.sasl.jaas.config)" in text.stdout, text.stdout


def test_a_run_still_needs_every_secret(project: Path) -> None:
    with pytest.raises(ConfigError, match=r"environment variable LOOK_S3A_SECRET is not set"):
        Pipeline.load(project)


def test_a_reading_verb_needs_the_storage_s_own_variables(tmp_path: Path, capsys: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOOK_STORAGE", raising=False)
    (tmp_path / "deltaflow.yml").write_text(SPEC.format(storage="${LOOK_STORAGE}"))
    shown = cli(capsys, "status", "--spec", str(tmp_path))
    assert shown.returncode == 1
    assert shown.stderr.strip() == (f"error: DF-CONFIG {tmp_path / 'deltaflow.yml'}: storage: environment "
                                    "variable LOOK_STORAGE is not set")
