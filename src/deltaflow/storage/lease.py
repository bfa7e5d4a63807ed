"""Table leases: one writing run per table, on any storage, and a crashed holder's hold runs out.

A run holds a lease on every table it writes: a small JSON record at ``StorageLayout.lease(table)`` naming
the holder (pipeline, run, host, pid) and when the hold runs out. Taking, renewing and releasing one is a
compare-and-swap on that record (:meth:`~deltaflow.storage.fs.FileSystem.write_if`: a conditional PUT on
S3, a locked read-compare-write on local disk), so of two runs racing for a table exactly one wins. The
holder renews every third of the TTL. A run killed without releasing keeps the table until the TTL passes,
then the next run takes it over; a run on the same machine (same kernel boot and pid namespace) that finds
the holder's process gone takes it over at once. Clocks of the machines sharing a storage must agree to
well within the TTL.

Example:
    >>> import tempfile
    >>> from deltaflow.storage import StorageLayout
    >>> layout = StorageLayout(tempfile.mkdtemp())
    >>> first = TableLeases(layout, "clickstream", "run-1", ttl_seconds=30)
    >>> first.acquire(["bronze_clicks"])
    >>> second = TableLeases(layout, "clickstream", "run-2", ttl_seconds=30)
    >>> second.acquire(["bronze_clicks"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    deltaflow.errors.LeaseError: DF-LEASE table 'bronze_clicks' is held by pipeline 'clickstream' ...
    >>> first.release()
    >>> second.acquire(["bronze_clicks"])

"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from deltaflow.errors import LeaseError, first_line
from deltaflow.storage.layout import StorageLayout


def this_machine() -> str:
    """The kernel boot and pid namespace of this process: where a pid means the same process as here."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return ""


#: The runs of this process that have ended: their holds are gone even if their release was not written.
_ENDED_RUNS: set[str] = set()


@dataclass(frozen=True)
class Holder:
    """Who holds a table, and until when (seconds since the epoch; 0 once released)."""

    pipeline: str
    run_id: str
    host: str
    pid: int
    expires: float
    machine: str = ""  # see :func:`this_machine`

    def is_gone(self) -> bool:
        """Whether the holder is known to be gone (on this machine: its pid has no process, or it ended).

        A run of this process that has ended is gone even if its release could not be written (a full disk).
        """
        here = bool(self.machine) and self.machine == this_machine()
        ended_here = self.pid == os.getpid() and self.run_id in _ENDED_RUNS
        return here and (not Path(f"/proc/{self.pid}").exists() or ended_here)

    def describe(self) -> str:
        """``pipeline 'p' run r (pid 4242 on host)``."""
        return f"pipeline '{self.pipeline}' run {self.run_id} (pid {self.pid} on {self.host})"

    @staticmethod
    def parse(text: str) -> Holder | None:
        """The holder a lease record names (None for a record deltaflow did not write)."""
        try:
            return Holder(**json.loads(text))
        except (ValueError, TypeError):
            return None


class TableLeases:
    """The leases of one run: take them all or none, keep them renewed, give them back.

    Args:
        layout: Where the leases live.
        pipeline: The run's pipeline (named to whoever is refused).
        run_id: The run's id.
        ttl_seconds: How long a hold outlives its last renewal.
        clock: Seconds since the epoch (tests move it).

    """

    def __init__(self, layout: StorageLayout, pipeline: str, run_id: str, ttl_seconds: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.layout = layout
        self.pipeline = pipeline
        self.run_id = run_id
        self.ttl = ttl_seconds
        self.clock = clock
        self.tokens: dict[str, str] = {}  # table -> token of the record this run last wrote
        self._lost: str | None = None  # why a held table was lost to another run
        self._failing: str | None = None  # why the last renewal failed, until one succeeds
        self.held_until = 0.0  # when the holds this run last wrote run out
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _record(self, expires: float) -> str:
        holder = Holder(self.pipeline, self.run_id, socket.gethostname(), os.getpid(), expires,
                        this_machine())
        return json.dumps(asdict(holder))

    def acquire(self, tables: Iterable[str]) -> None:
        """Take every table in ``tables`` (those this run already holds are kept).

        Raises:
            LeaseError: One is held by another run that has not run out: nothing is taken.

        """
        _ENDED_RUNS.discard(self.run_id)  # holding again
        try:
            for table in sorted(set(tables) - set(self.tokens)):
                self._take(table)
        except LeaseError:
            self.release()
            raise

    def _take(self, table: str) -> None:
        path = self.layout.lease(table)
        found = self.layout.fs.read_versioned(path)
        holder = Holder.parse(found[0]) if found else None
        now = self.clock()
        if (holder is not None and holder.run_id != self.run_id and holder.expires > now
                and not holder.is_gone()):
            until = datetime.fromtimestamp(holder.expires, UTC).strftime("%H:%M:%S UTC")
            raise LeaseError(f"table '{table}' is held by {holder.describe()} until {until}, unless renewed",
                             hint="stop that run first; a crashed run's hold runs out after the lease ttl")
        token = self.layout.fs.write_if(path, self._record(now + self.ttl), found[1] if found else None)
        if token is None:
            raise LeaseError(f"table '{table}' was taken by another run at the same moment",
                             hint="only one run writes a table at a time")
        self.tokens[table] = token
        self.held_until = now + self.ttl

    def renew(self) -> None:
        """Push every hold ``ttl`` further; a table another run took meanwhile sets :attr:`lost`."""
        expires = self.clock() + self.ttl
        for table, token in list(self.tokens.items()):
            renewed = self.layout.fs.write_if(self.layout.lease(table), self._record(expires), token)
            if renewed is None:
                del self.tokens[table]
                self._lost = self._lost or (f"lost table '{table}' to another run (this run could not "
                                            f"renew its lease within {self.ttl:.0f} s)")
            else:
                self.tokens[table] = renewed
        self.held_until = expires

    @property
    def lost(self) -> str | None:
        """Why this run must stop writing now: a table another run took, or holds about to run out.

        Renewing, holds run out a whole TTL after the last renewal, which comes every third of it. Storage
        that fails renewals (past its client's own retries), or answers too slowly, leaves them closer to
        running out: at a third of the TTL from it, the run is told, before another run may take them.
        """
        if (self._lost is None and self.tokens and self._renewer is not None and not self._stop.is_set()
                and self.clock() > self.held_until - self.ttl / 3):
            why = f": {self._failing}" if self._failing else " (storage too slow to answer)"
            self._lost = f"could not renew this run's table leases for {self.ttl * 2 / 3:.0f} s{why}"
        return self._lost

    def start_renewing(self) -> None:
        """Renew every third of the TTL on a background thread, until :meth:`release` (see :attr:`lost`)."""
        def loop() -> None:
            while not self._stop.wait(self.ttl / 3):
                try:
                    self.renew()
                    self._failing = None
                except Exception as exc:  # storage failing for a moment: the next round tries again
                    self._failing = first_line(exc)

        self._renewer = threading.Thread(target=loop, name="deltaflow-leases", daemon=True)
        self._renewer.start()

    def release(self) -> None:
        """Give every held table back (a record that has run out), and stop renewing."""
        _ENDED_RUNS.add(self.run_id)
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        for table, token in list(self.tokens.items()):
            with contextlib.suppress(Exception):  # if it fails, the hold runs out by itself
                self.layout.fs.write_if(self.layout.lease(table), self._record(0.0), token)
            del self.tokens[table]


def lease_ttl(spec_ttl: str) -> float:
    """The spec's ``lease.ttl`` in seconds."""
    from deltaflow.durations import parse_duration

    return parse_duration(spec_ttl).total_seconds()
