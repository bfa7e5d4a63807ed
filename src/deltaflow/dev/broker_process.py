"""Operating-system helpers for the embedded Kafka broker: Java, loopback ports, /proc, the broker's log.

:class:`deltaflow.dev.broker.EmbeddedKafka` uses these to find the ``java`` it launches, to pick and check
its ports, to tell whether a pid is still its broker, and to quote the broker's log in error messages.

Examples:
    >>> log_summary("SLF4J: no providers")
    'no output'

"""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path

from deltaflow.errors import KafkaBrokerError, SetupError

HOST = "127.0.0.1"
"""The loopback address the broker binds (clients and controller alike)."""

_CMDLINE_READS = 20
_CMDLINE_PAUSE = 0.025  # seconds between two reads of an empty /proc/<pid>/cmdline


def find_java() -> str:
    """The ``java`` executable: ``$JAVA_HOME/bin/java`` when it exists, else ``java`` on ``PATH``.

    Returns:
        The path of the Java launcher.

    Raises:
        SetupError: Neither ``$JAVA_HOME/bin/java`` nor a ``java`` on ``PATH`` exists.

    Examples:
        >>> find_java()  # doctest: +SKIP
        '/usr/lib/jvm/java-17-openjdk-amd64/bin/java'

    """
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home) / "bin" / "java" if java_home else None
    java = str(candidate) if candidate is not None and candidate.is_file() else shutil.which("java")
    if java is None:
        raise SetupError("Java ('java') is not on PATH", hint="install a JDK 17 or newer, or set JAVA_HOME")
    return java


def free_port() -> int:
    """A loopback TCP port that is free right now (the OS picks it).

    Examples:
        >>> 0 < free_port() < 65536
        True

    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def check_port_free(port: int) -> None:
    """Fail unless ``127.0.0.1:port`` can be bound.

    Args:
        port: The TCP port the broker is to listen on.

    Raises:
        KafkaBrokerError: Another process holds the port.

    Examples:
        >>> check_port_free(free_port())

    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            raise KafkaBrokerError(
                "the port is already in use by another process",
                location=f"{HOST}:{port}",
                hint="stop it or choose another port",
            ) from None


def is_broker_process(pid: int, config_file: Path) -> bool:
    """True when ``pid`` is alive and is ``kafka.Kafka`` running with ``config_file``.

    Its command line is read by :func:`command_line`.

    Args:
        pid: The process id to look at.
        config_file: The ``server.properties`` the broker was started with.

    Examples:
        >>> is_broker_process(os.getpid(), Path("/tmp/k/server.properties"))
        False

    """
    args = command_line(pid)
    return args is not None and b"kafka.Kafka" in args and str(config_file).encode() in args


def command_line(pid: int) -> list[bytes] | None:
    """The arguments ``pid`` runs with; None when it is gone, a zombie, or stays empty (a kernel thread).

    A process reads an empty ``/proc/<pid>/cmdline`` for a moment while it execs (the java launcher does,
    right after start) or exits, so an empty one is read again until it fills or the process is a zombie.

    Examples:
        >>> command_line(-1) is None
        True

    """
    if pid <= 0:
        return None
    for _ in range(_CMDLINE_READS):
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        if raw:
            return raw.split(b"\0")
        if is_zombie(pid):
            return None
        time.sleep(_CMDLINE_PAUSE)
    return None


def is_zombie(pid: int) -> bool:
    """True when ``pid`` is gone, a zombie or dead (``Z``/``X`` in ``/proc/<pid>/stat``).

    Examples:
        >>> is_zombie(os.getpid())
        False

    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] in (["Z"], ["X"])


def log_tail(path: Path, size: int = 16_384) -> str:
    """The last ``size`` bytes of the file at ``path`` as text; empty when it cannot be read.

    Examples:
        >>> log_tail(Path("/nonexistent/broker.log"))
        ''

    """
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - size))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def log_summary(text: str, lines: int = 3, width: int = 400) -> str:
    """The last meaningful lines of a log, joined into one line.

    SLF4J notices and stack-trace frames are left out; the result is cut to its last ``width`` characters.

    Args:
        text: The log (or tool output) to summarise.
        lines: How many of its last meaningful lines to keep.
        width: The longest summary returned.

    Examples:
        >>> log_summary("starting" + chr(10) + "ERROR bind failed")
        'starting | ERROR bind failed'

    """
    kept = [
        line.strip() for line in text.splitlines()
        if line.strip() and not line.startswith(("SLF4J:", "\tat ", "\t... "))
    ]
    if not kept and "no-operation (NOP) logger" in text:
        return "no log output (SLF4J fell back to its no-op logger: no slf4j-api 2 on the classpath)"
    summary = " | ".join(kept[-lines:]) or "no output"
    return summary if len(summary) <= width else "..." + summary[-width:]
