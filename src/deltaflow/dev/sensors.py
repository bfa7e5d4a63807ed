"""Generated IoT sensor readings for the sensors example (seed 004): mostly valid, some faulty.

A reading is the JSON a sensor sends: ``sensor_id``, ``ts`` (up to half a minute late), ``temperature_c``
around the sensor's own level, ``humidity`` and ``battery_v``. About 3 % are faulty, as field devices
send them: a temperature out of range (a stuck sensor's 999), a humidity over 100, a record cut short
(not JSON), or bytes that are not UTF-8.

Examples:
    >>> reading = sensor_reading(random.Random(7), datetime(2026, 11, 23, tzinfo=UTC))
    >>> sorted(reading) if isinstance(reading, dict) else reading[:12]
    ['battery_v', 'humidity', 'sensor_id', 'temperature_c', 'ts']

"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from deltaflow.dev.generator import Event

SENSORS = 50
FAULTY_SHARE = 0.03
FAULTS = ("stuck_temperature", "humidity_over_100", "cut_short", "not_utf8")


def sensor_id(number: int) -> str:
    """The id of sensor ``number`` (``sensor-007``)."""
    return f"sensor-{number:03d}"


def sensor_reading(rng: random.Random, now: datetime) -> Event:
    """One reading of a random sensor at about ``now``: a dict (JSON), or raw bytes for a broken record."""
    number = rng.randrange(SENSORS)
    level = 12.0 + (number * 7919 % 200) / 10  # each sensor sits at its own temperature, 12-32 °C
    at = now.astimezone(UTC) - timedelta(milliseconds=rng.randrange(30_000))
    reading = {
        "sensor_id": sensor_id(number),
        "ts": at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "temperature_c": round(rng.gauss(level, 1.5), 2),
        "humidity": round(min(max(rng.gauss(45, 12), 0), 100), 1),
        "battery_v": round(rng.uniform(3.3, 4.2), 2),
    }
    if rng.random() >= FAULTY_SHARE:
        return reading
    fault = rng.choice(FAULTS)
    if fault == "stuck_temperature":
        return {**reading, "temperature_c": 999.0}
    if fault == "humidity_over_100":
        return {**reading, "humidity": 100.0 + rng.randrange(1, 50)}
    text = f'{{"sensor_id": "{reading["sensor_id"]}", "ts": "{reading["ts"]}", "temp'
    return text.encode() if fault == "cut_short" else b'{"sensor_id": "\xff\xfe", "temperature_c": 20}'
