"""The unit tier: no JVM, no server; ``make test-fast`` runs it in seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import mark_tier


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_tier(items, Path(__file__).parent, "unit")
