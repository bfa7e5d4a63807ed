"""Named crash points: where a test makes a run die by SIGKILL, to prove nothing is lost or doubled after.

Off unless ``$DELTAFLOW_CRASH_AT`` names a point, as ``<point>`` or ``<point>@<n>`` (the n-th time this
process reaches it; default the first). The process group (Python driver and Spark JVM) is then killed at
once, as a power cut would. The points:

=================================  ======================================================================
``after_commit:<flow>``            a foreach-batch flow (auto CDC, foreach-batch sink, quarantine split,
                                   materialized view) committed its batch's Delta writes; Spark's
                                   checkpoint has not recorded the batch yet
``refresh_swapped:<dataset>``      a full refresh replaced the table's rows; its record is not cleared yet
``replay_applied:<table>``         a quarantine replay wrote its rows; its record is not cleared yet
=================================  ======================================================================

An append flow has no such point: Delta's own streaming sink commits and Spark records the batch with no
deltaflow code between them (the SIGKILL tests at random moments cover it).

Example:
    >>> crash_point("after_commit:silver")  # nothing happens unless $DELTAFLOW_CRASH_AT names it

"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections import Counter

ENV = "DELTAFLOW_CRASH_AT"
_hits: Counter[str] = Counter()
_lock = threading.Lock()


def crash_point(point: str) -> None:
    """SIGKILL this process group here when ``$DELTAFLOW_CRASH_AT`` names ``point`` (see the module)."""
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    name, _, nth = wanted.partition("@")
    if name != point:
        return
    with _lock:
        _hits[point] += 1
        if _hits[point] != int(nth or 1):
            return
    sys.stderr.write(f"deltaflow: crash point {point} reached: SIGKILL\n")
    sys.stderr.flush()
    os.killpg(os.getpgrp(), signal.SIGKILL)
