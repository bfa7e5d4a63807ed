"""The Spark tier: real Spark and real Delta tables, on the session's one SparkSession; no servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import mark_tier


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_tier(items, Path(__file__).parent, "spark")
