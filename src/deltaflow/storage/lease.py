"""Table leases: one writing run per table, on any storage, and a crashed holder's hold runs out.

A run holds a lease on every table it writes: a small JSON record at ``StorageLayout.lease(table)`` naming
the holder (pipeline, run, host, pid) and when the hold runs out. Taking, renewing and releasing one is a
compare-and-swap on that record (:meth:`~deltaflow.storage.fs.FileSystem.write_if`: a conditional PUT on
S3, a locked read-compare-write on local disk), so of two runs racing for a table exactly one wins. The
holder renews each table every third of the TTL, all tables at once, and stops writing when a hold comes
within a third of the TTL of running out unrenewed (:attr:`TableLeases.lost`). A run killed without
releasing keeps the table until the TTL passes, then the next run takes it over; a run on the same
machine (same kernel boot and pid namespace) that finds the holder's process gone takes it over at once.
Clocks of the machines sharing a storage must agree to well within the TTL.

Examples:
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
from deltaflow.storage.fs import FileSystem
from deltaflow.storage.layout import StorageLayout
from deltaflow.storage.s3 import S3FileSystem


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
        monotonic: Seconds that never jump (tests move it with ``clock``): it tells a slow renewal from
            a system clock that jumped ahead.

    """

    def __init__(self, layout: StorageLayout, pipeline: str, run_id: str, ttl_seconds: float,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.layout = layout
        self.pipeline = pipeline
        self.run_id = run_id
        self.ttl = ttl_seconds
        self.clock, self.monotonic = clock, monotonic
        self.tokens: dict[str, str] = {}  # table -> token of the record this run last wrote
        self.expiries: dict[str, float] = {}  # table -> when the hold this run last wrote runs out
        self._sent: dict[str, float] = {}  # table -> monotonic time its last successful renewal left
        self._waiting: dict[str, float] = {}  # table -> monotonic time the renewal in flight left
        self._lock = threading.Lock()
        self._lost: str | None = None  # why this run must stop writing
        self._lost_to_holder = False  # ... because another run holds a table now
        self._failing: str | None = None  # why the last renewal failed, until one succeeds
        self._stop = threading.Event()
        self._renewers: list[threading.Thread] = []

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
        new = sorted(set(tables) - set(self.tokens))
        try:
            for table in new:
                self._take(table)
        except LeaseError:
            self.release()
            raise
        if self._renewers:  # renewing already: the new tables too
            for table in new:
                self._start_renewer(table)

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
        with self._lock:
            self.tokens[table] = token
            self.expiries[table] = now + self.ttl
            self._sent[table] = self.monotonic()

    def renew(self) -> None:
        """Push every hold ``ttl`` further, all tables at once; a table another run took sets :attr:`lost`."""
        tables = list(self.tokens)
        if len(tables) == 1:
            self._renew(tables[0])
            return
        threads = [threading.Thread(target=self._renew, args=(table,), daemon=True) for table in tables]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _renew(self, table: str) -> None:
        """Renew ``table``'s hold (from now, as the request leaves): the record ends a TTL after that."""
        token = self.tokens.get(table)
        if token is None:
            return
        expires, sent = self.clock() + self.ttl, self.monotonic()
        with self._lock:
            self._waiting[table] = sent
        try:
            self._write_renewal(table, token, expires, sent)
        finally:
            with self._lock:
                self._waiting.pop(table, None)

    def _write_renewal(self, table: str, token: str, expires: float, sent: float) -> None:
        path = self.layout.lease(table)
        record = self._record(expires)
        fs = self._fs
        renewed = fs.write_if(path, record, token)
        if renewed is None:  # the record changed: by another run, or by a write of ours that landed late
            found = fs.read_versioned(path)
            holder = Holder.parse(found[0]) if found else None
            if holder is not None and holder.run_id != self.run_id:
                with self._lock:
                    self.tokens.pop(table, None)
                    self._lost = self._lost or f"lost table '{table}' to {holder.describe()}"
                    self._lost_to_holder = True
                return
            renewed = fs.write_if(path, record, found[1] if found else None)  # ours landed late, or gone
        if renewed is not None:
            with self._lock:
                if table in self.tokens:
                    self.tokens[table] = renewed
                    self.expiries[table] = expires
                    self._sent[table] = sent

    @property
    def _fs(self) -> FileSystem:
        """The storage, its retries of one renewal bounded by a third of the TTL (then the next one goes)."""
        fs = self.layout.fs
        return fs.within(self.ttl / 3) if isinstance(fs, S3FileSystem) else fs

    @property
    def held_until(self) -> float:
        """When the first of this run's holds runs out, unless renewed (0 before any is taken)."""
        with self._lock:
            return min((self.expiries[t] for t in self.tokens if t in self.expiries), default=0.0)

    @property
    def lost(self) -> str | None:
        """Why this run must stop writing now: a table another run took, or a hold about to run out.

        Each hold runs out a TTL after its last successful renewal was sent; renewals leave every third of
        the TTL, one table's beside the others'. Storage that keeps failing them, or answers too slowly,
        brings a hold closer to running out: a third of the TTL before it does (the margin for clocks and
        for the run's queries to stop), the run is told, before any other run may take the table.
        """
        until = self.held_until
        if (self._lost is None and self.tokens and self._renewers and not self._stop.is_set()
                and self.clock() > until - self.ttl / 3):
            since = self.clock() - (until - self.ttl)
            with self._lock:
                passed = self.monotonic() - min(self._sent.values(), default=self.monotonic())
            if since - passed > 2:  # the hold is as short for the other runs, whose clocks jumped too
                why = f": the system clock jumped {since - passed:.0f} s ahead ({passed:.0f} s passed)"
            else:
                why = f": {self._failing}" if self._failing else self._why_late()
            self._lost = f"could not renew this run's table leases for {since:.0f} s{why}"
        return self._lost

    def _why_late(self) -> str:
        """Why no renewal succeeded in time, storage failing aside: one waits on the storage, or none ran."""
        with self._lock:
            waiting = sorted(self._waiting.items(), key=lambda item: item[1])
        if waiting:
            table, began = waiting[0]
            return (f" (storage too slow to answer: the renewal of '{table}' has waited "
                    f"{self.monotonic() - began:.0f} s)")
        return " (no renewal ran in time: the process was too busy to schedule them)"

    @property
    def lost_hint(self) -> str:
        """What to do after :attr:`lost` stopped the run."""
        if self._lost_to_holder:
            return "this run stopped; start it again once the other ends"
        return "this run stopped before its holds ran out; start it again once the storage answers"

    def start_renewing(self) -> None:
        """Renew each table every third of the TTL, on a thread of its own, until :meth:`release`.

        Rounds keep their pace: a renewal that took long is followed by the next at once, not a third of
        the TTL later.
        """
        for table in sorted(self.tokens):
            self._start_renewer(table)

    def _start_renewer(self, table: str) -> None:
        def loop() -> None:
            due = time.monotonic() + self.ttl / 3
            while not self._stop.wait(max(0.0, due - time.monotonic())) and table in self.tokens:
                due += self.ttl / 3
                try:
                    self._renew(table)
                    self._failing = None
                except Exception as exc:  # storage failing past its retries: the next round tries again
                    self._failing = first_line(exc)

        thread = threading.Thread(target=loop, name=f"deltaflow-lease-{table}", daemon=True)
        self._renewers.append(thread)
        thread.start()

    def release(self) -> None:
        """Give every held table back (a record that has run out), and stop renewing."""
        _ENDED_RUNS.add(self.run_id)
        self._stop.set()
        for thread in self._renewers:
            thread.join()
        self._renewers = []
        for table, token in list(self.tokens.items()):
            with contextlib.suppress(Exception):  # if it fails, the hold runs out by itself
                self.layout.fs.write_if(self.layout.lease(table), self._record(0.0), token)
            del self.tokens[table]
            self.expiries.pop(table, None)
            self._sent.pop(table, None)


def lease_ttl(spec_ttl: str) -> float:
    """The spec's ``lease.ttl`` in seconds."""
    from deltaflow.spec.durations import parse_duration

    return parse_duration(spec_ttl).total_seconds()
