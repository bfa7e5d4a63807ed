"""What the JVM-free "nothing new" check refuses to vouch for, without looking any further."""

from __future__ import annotations

from typing import Any

import pytest

from deltaflow.runtime.nothing_new import _source_input


@pytest.mark.parametrize(("description", "offset", "reason"), [
    ("KafkaV2[SubscribePattern[clicks-.*]]", {"clicks-1": {"0": 5}}, "a source deltaflow cannot check"),
    ("KafkaV2[Subscribe[clicks,views]]", {"clicks": {"0": 5}}, "a Kafka topic its offsets do not name"),
    ("RateStreamV2[rowsPerSecond=1]", {"0": 1}, "a source deltaflow cannot check"),
    ("FileStreamSource[s3a://bucket/landing]", {"logOffset": 3}, "a file source deltaflow cannot list"),
    ("FileStreamSource[file:/data/landing/*.json]", {"logOffset": 3}, "a file source deltaflow cannot list"),
    ("FileStreamSource[file:/no/such/landing]", {"logOffset": 3}, "no folder /no/such/landing"),
])
def test_sources_it_cannot_vouch_for_start_spark(description: str, offset: Any, reason: str) -> None:
    found = _source_input(None, None, None, 0, description, offset).reason  # type: ignore[arg-type]
    assert found is not None and found.startswith(reason)
