"""A Hive Metastore service on loopback (Thrift), run from the jars pyspark ships (tests, the demo, a laptop).

``deltaflow metastore start`` runs ``org.apache.hadoop.hive.metastore.HiveMetaStore`` (Hive 2.3, the
version Spark's Hive client speaks) with its own state folder: an embedded Derby database and a warehouse
folder. A pipeline whose spec names ``metastore: {uri: thrift://127.0.0.1:9083}`` registers its tables
there; any Spark application configured with the same URI reads them by name.

Examples:
    >>> metastore = LocalMetastore(port=9083)  # doctest: +SKIP
    >>> metastore.start()  # doctest: +SKIP
    'thrift://127.0.0.1:9083'

"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from deltaflow.dev.broker_process import HOST, command_line, find_java, is_zombie
from deltaflow.errors import SetupError
from deltaflow.runtime.jars import home

DEFAULT_PORT = 9083
_MAIN = "org.apache.hadoop.hive.metastore.HiveMetaStore"


@dataclass(frozen=True)
class MetastoreState:
    """The service's URI, whether it answers, and its pid (None when none runs)."""

    uri: str
    running: bool
    pid: int | None


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1):
        return True
    return False


class LocalMetastore:
    """A Hive Metastore service on 127.0.0.1:``port``.

    Args:
        port: Its Thrift port.
        state_dir: Its Derby database, warehouse folder, log and pid file (default
            ``$DELTAFLOW_HOME/metastore/<port>``).

    """

    def __init__(self, port: int = DEFAULT_PORT, state_dir: Path | None = None) -> None:
        self.port = port
        self.state_dir = state_dir or home() / "metastore" / str(port)
        self.uri = f"thrift://{HOST}:{port}"
        self.log = self.state_dir / "metastore.log"

    @property
    def _pid_file(self) -> Path:
        return self.state_dir / "metastore.pid"

    def _pid(self) -> int | None:
        try:
            pid = int(self._pid_file.read_text())
        except (FileNotFoundError, ValueError):
            return None
        return pid if _MAIN.encode() in (command_line(pid) or []) else None

    def status(self) -> MetastoreState:
        """Whether the service answers on its port."""
        pid = self._pid()
        return MetastoreState(self.uri, pid is not None and _answers(self.port), pid)

    def _command(self) -> list[str]:
        import pyspark

        jars = Path(pyspark.__file__).parent / "jars"
        database = self.state_dir / "metastore_db"
        settings = {
            "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={database};create=true",
            "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
            "datanucleus.schema.autoCreateAll": "true",
            "hive.metastore.schema.verification": "false",
            "hive.metastore.warehouse.dir": (self.state_dir / "warehouse").as_uri(),
            "hive.metastore.event.db.notification.api.auth": "false",
            "derby.system.home": str(self.state_dir),
            "hive.async.log.enabled": "false",  # its async logger needs the LMAX disruptor, not shipped
        }
        return [find_java(), "-Xmx512m", *(f"-D{k}={v}" for k, v in settings.items()),
                "-cp", f"{jars}/*", _MAIN, "-p", str(self.port)]

    def start(self, timeout: float = 90.0) -> str:
        """Start the service (unless it runs); its URI once it answers.

        Raises:
            SetupError: The port is taken by something else, or the service did not come up in time
                (naming its log).

        """
        if self.status().running:
            return self.uri
        self.stop()
        if _answers(self.port):
            raise SetupError(f"port {self.port} on {HOST} is in use by another program",
                             hint="stop it, or start the metastore with --port")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as log:
            proc = subprocess.Popen(self._command(), stdout=log, stderr=subprocess.STDOUT,
                                    cwd=self.state_dir, start_new_session=True)
        self._pid_file.write_text(str(proc.pid))
        deadline = time.monotonic() + timeout
        while not _answers(self.port):
            if proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SetupError(f"the Hive Metastore at {self.uri} did not come up", hint=f"log: {self.log}")
            time.sleep(0.2)
        return self.uri

    def stop(self) -> bool:
        """Stop the service; False when none was running."""
        pid = self._pid()
        if pid is None:
            self._pid_file.unlink(missing_ok=True)
            return False
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while not is_zombie(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not is_zombie(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        self._pid_file.unlink(missing_ok=True)
        return True
