"""A local S3-compatible server on loopback for tests and the demo: moto's S3, made safe for writers.

``deltaflow s3 start`` runs it as a background process (``python -m deltaflow.dev.s3_server``) and returns
once it answers, with its buckets created; ``stop`` ends it. moto keeps objects in memory: they are gone
when the server stops.

moto checks a conditional PUT (``If-None-Match: *``, ``If-Match``) and then stores the object in two
steps, and serves requests on several threads, so two racing writers could both win. Every request that
changes something therefore runs alone (:class:`SerialWrites`), which makes the check and the store one
step, as on S3; reads stay concurrent. The fault tests make it fail chosen requests
(:mod:`deltaflow.dev.s3_faults`).

Examples:
    >>> server = LocalS3(port=19000)  # doctest: +SKIP
    >>> server.start(buckets=["lake"])  # doctest: +SKIP
    'http://127.0.0.1:19000'

"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deltaflow.dev.broker_process import HOST, is_zombie
from deltaflow.dev.s3_faults import FaultInjector
from deltaflow.errors import SetupError
from deltaflow.runtime.jars import home

DEFAULT_PORT = 19000
ACCESS_KEY = "deltaflow"  # moto takes any keys; these are what the demo and the tests use
SECRET_KEY = "deltaflow-secret"


class SerialWrites:
    """WSGI middleware: requests that change state (PUT, POST, DELETE) run one at a time."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:  # noqa: D102
        if environ.get("REQUEST_METHOD") in ("GET", "HEAD"):
            return self.app(environ, start_response)
        with self.lock:
            return list(self.app(environ, start_response))  # the whole answer, inside the lock


@dataclass(frozen=True)
class S3State:
    """Whether the server runs, where, and where its log is."""

    running: bool
    endpoint: str
    pid: int | None
    log_file: Path


class LocalS3:
    """The local S3 server's process: start, stop, status.

    Args:
        port: Its port on 127.0.0.1.
        state_dir: Where its pid file and log go (default ``$DELTAFLOW_HOME/s3``).

    """

    def __init__(self, port: int = DEFAULT_PORT, state_dir: Path | None = None) -> None:
        self.port = port
        self.state_dir = state_dir or home() / "s3"
        self.endpoint = f"http://{HOST}:{port}"

    @property
    def _pid_file(self) -> Path:
        return self.state_dir / f"s3-{self.port}.pid"

    @property
    def log_file(self) -> Path:
        """The server's log."""
        return self.state_dir / f"s3-{self.port}.log"

    def status(self) -> S3State:
        """Whether the server answers at its port."""
        pid = int(self._pid_file.read_text()) if self._pid_file.is_file() else None
        running = pid is not None and not is_zombie(pid) and self._answers()
        return S3State(running, self.endpoint, pid if running else None, self.log_file)

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2):
                return True
        except (urllib.error.URLError, OSError):
            return False

    def start(self, buckets: Iterable[str] = ("lake",), timeout: float = 30.0) -> str:
        """Start the server (unless it runs) and create ``buckets``; the endpoint.

        Raises:
            SetupError: moto is not installed, or the server did not answer in time (quoting its log).

        """
        if not self.status().running:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            with open(self.log_file, "wb") as log:
                command = [sys.executable, "-m", "deltaflow.dev.s3_server", "--port", str(self.port)]
                proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            self._pid_file.write_text(str(proc.pid))
            deadline = time.monotonic() + timeout
            while not self._answers():
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = self.log_file.read_text(errors="replace").strip().splitlines()[-1:]
                    raise SetupError(f"the local S3 server did not start at {self.endpoint}: "
                                     f"{(tail or ['no output'])[0][:300]}", hint=f"log: {self.log_file}")
                time.sleep(0.1)
        self.create_buckets_at(self.endpoint, buckets)
        return self.endpoint

    @staticmethod
    def create_buckets_at(endpoint: str, buckets: Iterable[str]) -> None:
        """Create each of ``buckets`` that does not exist on the server at ``endpoint``."""
        from deltaflow.spec import S3Spec
        from deltaflow.storage.s3 import S3FileSystem

        client = S3FileSystem(S3Spec(endpoint=endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                                     path_style=True)).client
        existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
        for bucket in set(buckets) - existing:
            client.create_bucket(Bucket=bucket)

    def stop(self) -> bool:
        """Stop the server; False when it was not running."""
        state = self.status()
        if state.pid is None:
            return False
        with contextlib.suppress(ProcessLookupError):  # it may have ended since it answered
            os.kill(state.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while not is_zombie(state.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self._pid_file.unlink(missing_ok=True)
        return True


def serve(port: int) -> None:
    """Serve moto's S3 on ``127.0.0.1:port`` until SIGTERM."""
    try:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import run_simple
    except ImportError:
        raise SetupError("moto is not installed", hint="'make setup' installs moto[server]") from None
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = FaultInjector(SerialWrites(DomainDispatcherApplication(create_backend_app)))
    with contextlib.suppress(KeyboardInterrupt):
        run_simple(HOST, port, app, threaded=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="deltaflow's local S3 server (moto)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    serve(parser.parse_args().port)
