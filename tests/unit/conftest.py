"""The unit tier: no JVM, no server; ``make test-fast`` runs it in seconds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import SparkStarted, mark_tier


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_tier(items, Path(__file__).parent, "unit")


@pytest.fixture
def no_jvm(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No SparkContext can start; one the test session already runs (the Spark tier's) is hidden too."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    def refuse(cls: type, *args: object, **kwargs: object) -> None:
        raise SparkStarted("Spark was started")

    monkeypatch.setattr(SparkContext, "_ensure_initialized", classmethod(refuse))
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    monkeypatch.setattr(SparkSession, "_instantiatedSession", None)
    monkeypatch.setattr(SparkSession, "_activeSession", None)
    yield
    assert SparkContext._active_spark_context is None
