"""Fixtures every tier shares: one SparkSession for the whole run, and pipeline projects on disk.

Each tier's ``conftest.py`` marks its own tests (``unit``, ``spark``, ``integration``), so markers follow
the directory: ``pytest -m unit`` is ``make test-fast``. The SparkSession starts on first use, so the unit
tier never starts a JVM.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from helpers import Project

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    from deltaflow.runtime.session import build_session

    warehouse = tmp_path_factory.mktemp("warehouse")
    session = build_session(extra={"spark.sql.warehouse.dir": str(warehouse),
                                   "spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


@pytest.fixture
def make_project(tmp_path: Path) -> Callable[..., Project]:
    def make(definitions: str, spec_extra: str = "", bootstrap: str = "", name: str = "project") -> Project:
        return Project(tmp_path / name, definitions, spec_extra, bootstrap)

    return make
