"""The sensors example (seed 004): a bug in stage 2 ships, the fix ships, the user rewinds stage 2.

The rewind is interrupted once (the process dies after the checkpoint and the quarantine moved back,
before the table is restored) and asked again. Afterwards the raw landing table holds every produced
record once, and the readings, their quarantine, the 10-minute statistics (a materialized view) and the
hot readings (a stream of the readings, which a RESTORE would feed twice) are exactly what the fixed
logic gives over the raw records, computed here in Python from the raw table read with ``deltalake``,
as if the bug had never been there.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

import deltaflow.commands.rewind as rewind_module
from deltaflow.dev.generator import field_key, produce
from deltaflow.dev.sensors import sensor_reading
from deltaflow.dev.topics import create_topic
from deltaflow.errors import ConfigError
from deltaflow.pipeline import Pipeline
from deltaflow.storage import StorageLayout
from helpers import cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sensors"
BATCH = 150


def buggy(definitions: str) -> str:
    """Stage 2 with a bug: a "units fix" that turns the Celsius readings into Fahrenheit."""
    fixed = ('                         required=["sensor_id", "ts"], keep=["topic", "partition", "offset", '
             '"kafka_ts"])')
    assert fixed in definitions
    bug = fixed + '.withColumn("temperature_c", F.col("temperature_c") * 1.8 + 32)'
    imports = "from pyspark.sql import functions as F\n\nimport deltaflow as dp"
    return definitions.replace(fixed, bug).replace("import deltaflow as dp", imports)


def table(storage: Path, name: str) -> list[dict[str, Any]]:
    return DeltaTable(StorageLayout(str(storage)).table(name)).to_pyarrow_table().to_pylist()


def expected(raw: list[dict[str, Any]]) -> tuple[list[tuple[Any, ...]], set[tuple[int, int]]]:
    """The readings the fixed stage 2 keeps, and the (partition, offset) of the records it quarantines."""
    readings, quarantined = [], set()
    for record in raw:
        try:
            reading = json.loads(record["raw_payload"]) if record["raw_bytes"] is None else None
        except ValueError:
            reading = None
        if (reading is None or reading.get("sensor_id") is None or reading.get("ts") is None
                or not -40 <= reading["temperature_c"] <= 85 or not 0 <= reading["humidity"] <= 100):
            quarantined.add((record["partition"], record["offset"]))
            continue
        at = datetime.fromisoformat(reading["ts"].replace("Z", "+00:00"))
        readings.append((reading["sensor_id"], at, reading["temperature_c"]))
    return sorted(readings), quarantined


def window_stats(readings: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], tuple[float, ...]]:
    groups: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for sensor, at, temperature in readings:
        start = at - timedelta(minutes=at.minute % 10, seconds=at.second, microseconds=at.microsecond)
        groups[(start, sensor)].append(temperature)
    return {k: (len(v), min(v), max(v), sum(v) / len(v)) for k, v in groups.items()}


def test_rewound_stage_2_bug_leaves_no_trace(spark, kafka_bootstrap, tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "sensors"
    shutil.copytree(EXAMPLE, folder)
    storage, topic = tmp_path / "storage", f"sensor_readings_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("DELTAFLOW_STORAGE", str(storage))
    monkeypatch.setenv("DELTAFLOW_KAFKA", kafka_bootstrap)
    monkeypatch.setenv("DELTAFLOW_TOPIC", topic)
    create_topic(kafka_bootstrap, topic, partitions=2)
    rng, produced = random.Random(4), 0
    stage2 = folder / "transformations" / "readings.py"
    fixed = stage2.read_text()

    def batch_then_run() -> None:
        nonlocal produced
        now = datetime.now(UTC)
        produced += produce(kafka_bootstrap, topic, [sensor_reading(rng, now) for _ in range(BATCH)],
                            field_key("sensor_id"))
        Pipeline.load(folder, spark=spark).run("available_now")

    batch_then_run()
    history = Pipeline.load(folder).history("sensor_readings", 1)
    before_bug = history[0].timestamp
    stage2.write_text(buggy(fixed))  # the bug ships and runs twice
    batch_then_run()
    batch_then_run()
    raw = table(storage, "raw_sensor_readings")
    assert sorted(r["temperature_c"] for r in table(storage, "sensor_readings")) != \
        [t for _, _, t in expected(raw)[0]]

    stage2.write_text(fixed)  # the fix ships; stage 2 goes back to just before the first bad run
    moment = (before_bug + timedelta(milliseconds=1)).isoformat()
    command = ("rewind", "sensor_readings", "--to-timestamp", moment, "--spec", str(folder))
    restore = rewind_module._restore

    def dies_at_the_table(spark: Any, path: str, version: int) -> None:
        if path == StorageLayout(str(storage)).table("sensor_readings"):
            raise KeyboardInterrupt
        restore(spark, path, version)

    monkeypatch.setattr(rewind_module, "_restore", dies_at_the_table)
    assert cli(capsys, *command).returncode != 0
    monkeypatch.setattr(rewind_module, "_restore", restore)
    assert StorageLayout(str(storage)).rewound_tables() == ["sensor_readings"]  # the next call finishes it
    rewound = cli(capsys, *command)
    assert rewound.returncode == 0, rewound.stderr
    assert "finishing the rewind" in rewound.stderr
    first = rewound.stdout.splitlines()[0]
    assert first.startswith(f"sensor_readings: rewound to version {history[0].version} "), first
    assert "the next run rebuilds hot_readings, sensor_stats_10min (downstream)" in rewound.stdout
    batch_then_run()

    raw = table(storage, "raw_sensor_readings")
    assert len(raw) == produced == 4 * BATCH  # the raw zone is not touched: every record once
    assert len({(r["partition"], r["offset"]) for r in raw}) == produced
    readings, quarantined = expected(raw)
    got = table(storage, "sensor_readings")
    assert sorted((r["sensor_id"], r["ts"], r["temperature_c"]) for r in got) == readings
    quarantine = table(storage, "sensor_readings_quarantine")
    assert {(r["partition"], r["offset"]) for r in quarantine} == quarantined
    assert len(quarantine) == len(quarantined)  # each once
    stats = {(r["window"]["start"], r["sensor_id"]): (r["readings"], r["min_temperature_c"],
                                                      r["max_temperature_c"], r["avg_temperature_c"])
             for r in table(storage, "sensor_stats_10min")}
    want = window_stats(readings)
    assert stats.keys() == want.keys()
    for key, values in want.items():
        assert stats[key] == pytest.approx(values), key
    hot = sorted((r["sensor_id"], r["ts"], r["temperature_c"]) for r in table(storage, "hot_readings"))
    assert hot == [r for r in readings if r[2] > 30]

    pipeline = Pipeline.load(folder, spark=spark)
    restored = next(v.version for v in pipeline.history("sensor_readings", 0) if v.operation == "RESTORE")
    latest = pipeline.history("sensor_readings", 1)[0].version
    for arguments, message in [
        (("sensor_stats_10min", 0), "'sensor_stats_10min' is a materialized view, not a streaming table"),
        (("sensor_reading", 0), "unknown table 'sensor_reading' (did you mean 'sensor_readings'?)"),
        (("sensor_readings", latest), f"'sensor_readings' is at version {latest}; nothing to rewind"),
        (("sensor_readings", 1), f"past version {restored}: a rewind replaced its rows there"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)) as info:
            pipeline.rewind(*arguments)
        assert "\n" not in str(info.value)
