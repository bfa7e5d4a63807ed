"""A real Apache Kafka broker (KRaft, single node) run as a separate JVM on loopback.

The broker is one process in combined mode (broker + controller), bound to ``127.0.0.1`` only. Its
state lives in one folder (default ``$DELTAFLOW_HOME/kafka``)::

    server.properties  log4j2.properties  broker.pid (json)  data/ (topics)  logs/broker.log

The storage is formatted once, so a restarted broker keeps its topics. A pid file left by a broker that is
gone (or whose pid now belongs to another program) is noticed and removed.

The files the broker runs with are written by :mod:`deltaflow.dev.broker_config`; finding Java, checking
ports and recognising the broker's process are in :mod:`deltaflow.dev.broker_process`.

Examples:
    >>> from deltaflow.dev.broker import EmbeddedKafka
    >>> with EmbeddedKafka(port=19092) as kafka:  # doctest: +SKIP
    ...     print(kafka.bootstrap)
    127.0.0.1:19092

"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from confluent_kafka import KafkaException

from deltaflow.dev.broker_config import format_storage, write_config
from deltaflow.dev.broker_process import (
    HOST,
    check_port_free,
    find_java,
    free_port,
    is_broker_process,
    log_summary,
    log_tail,
)
from deltaflow.dev.topics import admin_client, try_create_topic
from deltaflow.errors import KafkaBrokerError
from deltaflow.runtime.jars import home, jars

__all__ = ["HOST", "READY_TOPIC", "BrokerStatus", "EmbeddedKafka"]

READY_TOPIC = "__deltaflow_ready"
"""Topic created to prove that the broker accepts work; created once, then found on restarts."""

_HEAP = ["-Xmx512m", "-Xms256m"]
_POLL = 0.1


@dataclass(frozen=True)
class BrokerStatus:
    """What :meth:`EmbeddedKafka.status` found.

    Attributes:
        running: A broker process started from this state folder is alive.
        pid: Its process id, when running.
        bootstrap: Its ``host:port``, when running.
        state_dir: The broker's state folder.
        log_file: The broker's log file.

    Examples:
        >>> EmbeddedKafka(Path("/tmp/k")).status().running  # doctest: +SKIP
        False

    """

    running: bool
    pid: int | None
    bootstrap: str | None
    state_dir: Path
    log_file: Path


class EmbeddedKafka:
    """A single-node KRaft Kafka broker on ``127.0.0.1:port``, its state kept in ``state_dir``.

    Args:
        state_dir: Folder for configuration, data, logs and the pid file (default ``home() / "kafka"``).
        port: Client (PLAINTEXT) port; the controller gets a free loopback port of its own.

    Examples:
        >>> kafka = EmbeddedKafka(port=19092)  # doctest: +SKIP
        >>> kafka.start()  # doctest: +SKIP
        '127.0.0.1:19092'
        >>> kafka.stop()  # doctest: +SKIP
        True

    """

    def __init__(self, state_dir: Path | None = None, port: int = 19092) -> None:
        self.state_dir = Path(state_dir if state_dir is not None else home() / "kafka").absolute()
        self.port = port
        self.controller_port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    # -- paths ---------------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:<port>`` of this broker."""
        return f"{HOST}:{self.port}"

    @property
    def config_file(self) -> Path:
        """The ``server.properties`` the broker runs with."""
        return self.state_dir / "server.properties"

    @property
    def data_dir(self) -> Path:
        """Kafka's ``log.dirs``: topics and KRaft metadata."""
        return self.state_dir / "data"

    @property
    def log_file(self) -> Path:
        """The broker's stdout, stderr and log4j2 output (WARN and above)."""
        return self.state_dir / "logs" / "broker.log"

    @property
    def pid_file(self) -> Path:
        """JSON file with ``pid``, ``port``, ``controller_port`` and ``bootstrap`` of a started broker."""
        return self.state_dir / "broker.pid"

    # -- public API ----------------------------------------------------------------------------------

    def status(self) -> BrokerStatus:
        """Whether a broker started from this state folder is running (a stale pid file is removed).

        Examples:
            >>> EmbeddedKafka(Path("/tmp/k")).status()  # doctest: +SKIP
            BrokerStatus(running=False, pid=None, bootstrap=None, state_dir=..., log_file=...)

        """
        record = self._live_record()
        return BrokerStatus(
            running=record is not None,
            pid=record["pid"] if record else None,
            bootstrap=record["bootstrap"] if record else None,
            state_dir=self.state_dir,
            log_file=self.log_file,
        )

    def start(self, timeout: float = 60) -> str:
        """Start the broker, or find it running, and return its bootstrap once it can create a topic.

        Args:
            timeout: Seconds to wait for the broker to become ready.

        Returns:
            The bootstrap address, ``127.0.0.1:<port>``.

        Raises:
            KafkaBrokerError: The port is taken, storage formatting failed, the broker exited during
                startup (the message quotes the end of its log) or it was not ready within ``timeout``.
            SetupError: Java or the broker jars are missing.

        Examples:
            >>> EmbeddedKafka(port=19092).start()  # doctest: +SKIP
            '127.0.0.1:19092'

        """
        with self._locked():  # creates the state folder
            record = self._live_record()
            if record is not None:
                self.port, self.controller_port = record["port"], record["controller_port"]
                self._wait_ready(record["pid"], timeout)
                return self.bootstrap
            check_port_free(self.port)
            self.controller_port = free_port()
            java = find_java()
            classpath = os.pathsep.join(str(jar) for jar in jars("kafka-broker"))
            self._write_config()
            format_storage(java, classpath, self.config_file, self.data_dir)
            pid = self._launch(java, classpath)
            self._write_record(pid)
        try:
            self._wait_ready(pid, timeout)
        except BaseException:
            self._abort(pid)
            raise
        return self.bootstrap

    def stop(self, timeout: float = 30) -> bool:
        """Stop the broker: SIGTERM (controlled shutdown), then SIGKILL after ``timeout`` seconds.

        Args:
            timeout: Seconds to wait for a clean exit before killing the process.

        Returns:
            True when a broker was running.

        Examples:
            >>> EmbeddedKafka(port=19092).stop()  # doctest: +SKIP
            True

        """
        with self._locked():
            record = self._live_record()
            if record is None:
                self._reap()
                return False
            pid = record["pid"]
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            if not self._wait_exit(pid, timeout):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                self._wait_exit(pid, 10)
            self._reap()
            self.pid_file.unlink(missing_ok=True)
            return True

    def __enter__(self) -> EmbeddedKafka:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- state -----------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Serialise start/stop of one state folder across processes."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with (self.state_dir / ".lock").open("w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _live_record(self) -> dict[str, Any] | None:
        """The pid file's content when its process is this folder's broker; a stale file is removed."""
        try:
            record = json.loads(self.pid_file.read_text())
            pid = int(record["pid"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            record, pid = None, -1
        if record is not None and is_broker_process(pid, self.config_file):
            return dict(record)
        self.pid_file.unlink(missing_ok=True)
        return None

    def _write_record(self, pid: int) -> None:
        record = {
            "pid": pid,
            "port": self.port,
            "controller_port": self.controller_port,
            "bootstrap": self.bootstrap,
        }
        tmp = self.pid_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(record) + "\n")
        tmp.replace(self.pid_file)

    # -- start steps -----------------------------------------------------------------------------------

    def _write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        write_config(
            self.config_file, self.state_dir / "log4j2.properties", bootstrap=self.bootstrap,
            controller=f"{HOST}:{self.controller_port}", data_dir=self.data_dir, log_file=self.log_file,
        )

    def _launch(self, java: str, classpath: str) -> int:
        """Start the broker JVM detached, its output going to the log file; return its pid."""
        if self.log_file.exists():
            self.log_file.replace(self.log_file.with_suffix(".log.1"))
        log4j2 = self.state_dir / "log4j2.properties"
        command = [
            java, *_HEAP, "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j2}", "-cp", classpath, "kafka.Kafka", str(self.config_file),
        ]
        with self.log_file.open("ab") as log:
            self._proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.state_dir, start_new_session=True,
            )
        return self._proc.pid

    def _wait_ready(self, pid: int, timeout: float) -> None:
        """Poll until the broker creates (or finds) the probe topic; fail if it exits or times out."""
        admin = admin_client(self.bootstrap)
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            self._check_alive(pid)
            try:
                if try_create_topic(admin, READY_TOPIC, timeout=max(0.5, min(left, 1.0))):
                    return
            except KafkaException as exc:
                raise KafkaBrokerError(
                    f"the broker refused the probe topic: {exc}", location=self.bootstrap,
                    hint=f"see {self.log_file}",
                ) from None
            self._pause(min(_POLL * 2, max(0.0, deadline - time.monotonic())))
        self._check_alive(pid)
        raise KafkaBrokerError(
            f"the broker was not ready within {timeout:g}s",
            location=self.bootstrap,
            hint=f"see {self.log_file}",
        )

    def _running(self, pid: int) -> bool:
        """Our own child is asked directly (exact, reaps it); another process is looked up in /proc."""
        proc = self._proc
        if proc is not None and proc.pid == pid:
            return proc.poll() is None
        return is_broker_process(pid, self.config_file)

    def _check_alive(self, pid: int) -> None:
        if self._running(pid):
            return
        proc = self._proc
        code = proc.returncode if proc is not None and proc.pid == pid else None
        self.pid_file.unlink(missing_ok=True)
        exit_text = f"code {code}" if code is not None else "unknown code"
        raise KafkaBrokerError(
            f"the broker exited during startup ({exit_text}): {log_summary(log_tail(self.log_file))}",
            location=self.bootstrap,
            hint=f"see {self.log_file}",
        )

    # -- stop steps ------------------------------------------------------------------------------------

    def _pause(self, seconds: float) -> None:
        """Wait up to ``seconds``, returning early when our child process exits."""
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=seconds)
        else:
            time.sleep(seconds)

    def _wait_exit(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self._running(pid):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._pause(min(_POLL, left))
        return True

    def _abort(self, pid: int) -> None:
        """Kill the broker this object just launched (it failed to become ready) and forget it."""
        if self._running(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            self._wait_exit(pid, 10)
        self._reap()
        self.pid_file.unlink(missing_ok=True)

    def _reap(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=1)
            self._proc = None

