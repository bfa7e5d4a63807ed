"""The integration tier: Spark plus the servers the project starts itself (one Kafka broker per run),
and the tests that need a process of their own (SIGKILL, SIGTERM)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import free_port, mark_tier


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_tier(items, Path(__file__).parent, "integration")


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from deltaflow.dev.broker import EmbeddedKafka

    broker = EmbeddedKafka(state_dir=tmp_path_factory.mktemp("kafka"), port=free_port())
    bootstrap = broker.start()
    yield bootstrap
    broker.stop()
