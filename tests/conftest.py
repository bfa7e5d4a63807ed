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

from helpers import TEST_SPARK_CONF, Project

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    from deltaflow.runtime.session import build_session, driver_java_options

    warehouse = tmp_path_factory.mktemp("warehouse")
    # the parallel collector: a long-lived JVM's throughput, without G1's concurrent threads on two cores
    jvm = f"{driver_java_options()} -XX:+UseParallelGC"
    session = build_session(extra={"spark.sql.warehouse.dir": str(warehouse),
                                   "spark.sql.shuffle.partitions": "2", "spark.driver.extraJavaOptions": jvm,
                                   **TEST_SPARK_CONF})
    yield session
    session.stop()


@pytest.fixture
def make_project(tmp_path: Path) -> Callable[..., Project]:
    def make(definitions: str, spec_extra: str = "", bootstrap: str = "", name: str = "project") -> Project:
        return Project(tmp_path / name, definitions, spec_extra, bootstrap)

    return make
