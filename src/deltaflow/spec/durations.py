"""Durations as people write them (``7d``, ``36h``, ``90 minutes``) and as Delta writes them; moments.

Examples:
    >>> parse_duration("36h")
    datetime.timedelta(days=1, seconds=43200)
    >>> human(timedelta(hours=49))
    '3d'

"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from deltaflow.errors import ConfigError

_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3_600, "hour": 3_600,
          "d": 86_400, "day": 86_400, "w": 604_800, "week": 604_800}


def parse_duration(text: str) -> timedelta:
    """``7d``, ``36h``, ``90 minutes``, or Delta's ``interval 7 days``.

    Examples:
        >>> parse_duration("interval 36 hours")
        datetime.timedelta(days=1, seconds=43200)

    Raises:
        ConfigError: Not a duration.

    """
    match = re.fullmatch(r"(?:interval\s+)?(\d+(?:\.\d+)?)\s*([a-z]+?)s?", text.strip().lower())
    if match is None or match.group(2) not in _UNITS:
        raise ConfigError(f"'{text}' is not a duration", hint="e.g. 7d, 36h, 90m, 0s")
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


def human(duration: timedelta, up: bool = True) -> str:
    """``duration`` in its largest whole unit (``3h``, ``2d``, ``45s``), rounded ``up`` or down.

    Up for what must be kept ("keep at least 3d"), down for an age or a time left ("6d old").
    """
    seconds = duration.total_seconds()
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if seconds >= size or unit == "s":
            whole = -(-seconds // size) if up else seconds // size
            return f"{whole:.0f}{unit}"
    raise AssertionError("unreachable")


def parse_moment(text: str) -> datetime:
    """An ISO 8601 time (``2026-11-20T14:00:00Z``, ``2026-11-20 14:00``); UTC unless it gives an offset.

    Examples:
        >>> parse_moment("2026-11-20 14:00").isoformat()
        '2026-11-20T14:00:00+00:00'

    Raises:
        ConfigError: Not such a time.

    """
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(f"'{text}' is not a time", hint="ISO 8601, e.g. 2026-11-20T14:00:00Z") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
