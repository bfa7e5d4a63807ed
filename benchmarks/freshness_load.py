"""The freshness benchmark's load and its measurement of gold (see ``freshness.py``).

Generator and probe processes produce to Kafka (spawned, so that their Python does not hold the
benchmark's GIL); :class:`GoldLog` replays gold's Delta log to learn when each probe first appeared.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from deltaflow.dev.generator import EventGenerator, clickstream_event, encode_event, user_key
from deltaflow.dev.topics import QUIET

PROBE = "probe-"
EVENTS_PER_GENERATOR = 12_000  # one Python generator process makes ~25k events/s alone; keep a margin


# -- load: generator and probe processes (spawned, so that their Python does not hold this process's GIL) --

def _generate(bootstrap: str, topic: str, rate: float, seed: int, stop: Any, out: Any) -> None:
    gen = EventGenerator(bootstrap, topic, rate=rate, seed=seed)
    t0, cpu0 = time.time(), time.process_time()
    gen.start()
    stop.wait()
    t1 = time.time()
    gen.stop()
    gen.join()
    out.put(("generated", gen.produced, t1 - t0, time.process_time() - cpu0,
             repr(gen.error) if gen.error else None))


def _probe(bootstrap: str, topic: str, interval: float, count: int, go: Any, stop: Any, out: Any) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 0, **QUIET})
    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    rng = random.Random()
    go.wait()
    start = time.monotonic()
    sent = []
    for n in range(count):
        if stop.wait(max(0.0, start + n * interval - time.monotonic())):
            break
        now = datetime.now(UTC)
        event = clickstream_event(rng, now)
        product = f"{PROBE}{n:04d}"
        event.update(product_id=product, event_type="view", revenue=0.0, page=f"/product/{product}",
                     event_timestamp=now.isoformat(timespec="milliseconds").replace("+00:00", "Z"))
        produced_at = time.time()
        producer.produce(topic, value=encode_event(event), key=user_key(event), on_delivery=delivered)
        producer.flush(10)
        sent.append((product, produced_at))
    out.put(("probes", sent, errors))


class Load:
    """Generator processes producing ``rate`` events/s to ``topic`` (and a probe process, if asked)."""

    def __init__(self, bootstrap: str, topic: str, rate: float,
                 probes: tuple[float, int] | None = None) -> None:
        context = mp.get_context("spawn")
        self.stopping, self.go, self.out = context.Event(), context.Event(), context.Queue()
        self.generators = max(1, math.ceil(rate / EVENTS_PER_GENERATOR))
        self.messages: list[tuple[Any, ...]] = []
        self.processes = [context.Process(target=_generate, daemon=True, args=(
            bootstrap, topic, rate / self.generators, 1000 * i + 7, self.stopping, self.out))
            for i in range(self.generators)]
        if probes is not None:
            self.processes.append(context.Process(target=_probe, daemon=True, args=(
                bootstrap, topic, *probes, self.go, self.stopping, self.out)))
        for process in self.processes:
            process.start()

    def probes(self) -> list[tuple[str, float]] | None:
        """(product_id, produce time) of each probe, once the probe process has sent them all."""
        while not self.out.empty():
            self.messages.append(self.out.get())
        return next((m[1] for m in self.messages if m[0] == "probes"), None)

    def stop(self) -> None:
        self.stopping.set()
        self.go.set()
        while sum(m[0] == "generated" for m in self.messages) < self.generators:
            self.messages.append(self.out.get(timeout=120))
        for process in self.processes:
            process.join(timeout=60)

    @property
    def rate(self) -> float:
        """Events per second the generators had acknowledged."""
        generated = [m for m in self.messages if m[0] == "generated"]
        return float(sum(m[1] for m in generated) / max(m[2] for m in generated))

    @property
    def cpu(self) -> float:
        """CPU the generators used, in cores."""
        return float(sum(m[3] / m[2] for m in self.messages if m[0] == "generated"))

    @property
    def problems(self) -> list[str]:
        return ([m[4] for m in self.messages if m[0] == "generated" and m[4]]
                + [e for m in self.messages if m[0] == "probes" for e in m[2]])


# -- CPU: is the machine saturated while the probes run? ------------------------------------------------

class CpuMeter:
    """Cores in use between :meth:`start` and :meth:`stop`: the whole machine's, and one process's.

    Read from ``/proc/stat`` (every CPU's busy time) and ``/proc/<pid>/stat`` (the process's user + system
    time), in clock ticks; on a machine without ``/proc`` both stay NaN.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.machine = self.process = math.nan
        self._began: tuple[float, int, int] | None = None

    def _ticks(self) -> tuple[float, int, int] | None:
        try:
            fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
            # everything but idle and iowait is busy; guest time is already in user time
            busy = sum(int(v) for v in fields[:8]) - int(fields[3]) - int(fields[4])
            stat = Path(f"/proc/{self.pid}/stat").read_text()
            own = stat[stat.rindex(")") + 2:].split()  # after the command name, which may hold spaces
            return time.monotonic(), busy, int(own[11]) + int(own[12])  # utime + stime
        except (OSError, ValueError, IndexError):
            return None

    def start(self) -> None:
        self._began = self._ticks()

    def stop(self) -> None:
        now = self._ticks()
        if self._began is None or now is None:
            return
        seconds, tick = now[0] - self._began[0], os.sysconf("SC_CLK_TCK")
        self.machine = (now[1] - self._began[1]) / tick / seconds
        self.process = (now[2] - self._began[2]) / tick / seconds


# -- reading gold: replay the Delta log, each added file read once --------------------------------------

@dataclass
class GoldLog:
    """Replays the JSON commits of a Delta table from version 0 (nothing is cleaned up in a short run).

    For every version: its commit time, the sum of ``view_count`` of the live non-probe rows, and the probes
    whose row first appears in it. The commit time is the commit file's mtime on local disk; on S3, whose
    object times are whole seconds, the commit's own ``commitInfo.timestamp`` (taken by the writer just
    before it PUTs the file).
    """

    path: str  # a folder, or s3a://bucket/key with ``s3`` its server and keys
    s3: Any = None
    version: int = -1
    live: dict[str, int] = field(default_factory=dict)
    versions: list[tuple[float, int]] = field(default_factory=list)  # (commit time, events in gold)
    first_seen: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from deltaflow.storage.fs import filesystem_for, local_path

        self.local = local_path(self.path)
        self.fs = filesystem_for(self.path, self.s3)
        self.arrow_fs: Any = None
        if self.local is None:
            from pyarrow.fs import S3FileSystem

            endpoint = urlparse(self.s3.endpoint)
            self.arrow_fs = S3FileSystem(access_key=self.s3.access_key, secret_key=self.s3.secret_key,
                                         endpoint_override=endpoint.netloc, scheme=endpoint.scheme,
                                         region=self.s3.region)

    def _read_commit(self, version: int) -> tuple[float, list[dict[str, Any]]] | None:
        name = f"{self.local or self.path}/_delta_log/{version:020d}.json"
        if self.local is not None:
            try:
                mtime, text = Path(name).stat().st_mtime, Path(name).read_text()
            except FileNotFoundError:
                return None
        elif (text := self.fs.read_text(name)) is None:
            return None
        actions = [json.loads(line) for line in text.splitlines()]
        if self.local is None:
            mtime = next(a["commitInfo"]["timestamp"] for a in actions if "commitInfo" in a) / 1000
        return mtime, actions

    def advance(self) -> None:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        while (commit := self._read_commit(self.version + 1)) is not None:
            moment, actions = commit
            for action in actions:
                if "add" in action:
                    if action["add"].get("deletionVector"):
                        raise RuntimeError(f"{self.path} v{self.version + 1}: deletion vectors are not "
                                           "handled by this benchmark")
                    name = self._file(action["add"]["path"])
                    table = pq.read_table(name, columns=["product_id", "view_count"],
                                          filesystem=self.arrow_fs)
                    probe = pc.fill_null(pc.starts_with(table["product_id"], PROBE), False)
                    for product in table["product_id"].filter(probe).to_pylist():
                        self.first_seen.setdefault(product, moment)
                    total = pc.sum(table["view_count"].filter(pc.invert(probe))).as_py()
                    self.live[name] = int(total or 0)
                elif "remove" in action:
                    self.live.pop(self._file(action["remove"]["path"]), None)
            self.version += 1
            self.versions.append((moment, sum(self.live.values())))

    def _file(self, path: str) -> str:
        """A data file's name as pyarrow opens it: a local path, or bucket/key on S3."""
        if "://" in path or path.startswith("file:"):
            parsed = urlparse(path)
            return unquote(parsed.path) if self.local is not None else parsed.netloc + unquote(parsed.path)
        if self.local is not None:
            return f"{self.local}/{unquote(path)}"
        return f"{self.path.split('://', 1)[1]}/{unquote(path)}"

    @property
    def events(self) -> int:
        return self.versions[-1][1] if self.versions else 0

    def events_at(self, moment: float) -> int:
        """Events in gold at ``moment`` (by commit time)."""
        return max((total for at, total in self.versions if at <= moment), default=0)

    def first_with(self, events: int) -> float | None:
        """Commit time of the first version holding at least ``events`` events."""
        return next((at for at, total in self.versions if total >= events), None)


