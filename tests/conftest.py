"""Shared fixtures: one SparkSession and one Kafka broker for the whole run, and pipeline projects."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from helpers import Project, free_port

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


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from deltaflow.dev.broker import EmbeddedKafka

    broker = EmbeddedKafka(state_dir=tmp_path_factory.mktemp("kafka"), port=free_port())
    bootstrap = broker.start()
    yield bootstrap
    broker.stop()


@pytest.fixture
def make_project(tmp_path: Path) -> Callable[..., Project]:
    def make(definitions: str, spec_extra: str = "", bootstrap: str = "", name: str = "project") -> Project:
        return Project(tmp_path / name, definitions, spec_extra, bootstrap)

    return make
