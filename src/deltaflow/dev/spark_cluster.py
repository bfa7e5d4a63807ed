"""A Spark standalone cluster on loopback: a master and workers, each its own process (tests, the demo).

pip's pyspark has no ``start-master.sh``; its ``bin/spark-class`` runs the master and the workers the way
Spark's scripts do. ``deltaflow cluster start`` returns once every worker has registered with the master;
a pipeline then runs on it with ``configuration: {spark.master: spark://127.0.0.1:7077}``. Executors start
Python with the driver's interpreter, so on this machine deltaflow and the definitions' imports come from
the same virtualenv (see docs/production.md for a real cluster).

Examples:
    >>> cluster = LocalSparkCluster(port=7077, workers=2)  # doctest: +SKIP
    >>> cluster.start()  # doctest: +SKIP
    'spark://127.0.0.1:7077'

"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from deltaflow.dev.broker_process import HOST, command_line, is_zombie
from deltaflow.errors import SetupError
from deltaflow.runtime.jars import home

DEFAULT_PORT = 7077


@dataclass(frozen=True)
class ClusterState:
    """The master's URL, whether it answers, and its alive workers."""

    master: str
    running: bool
    workers: int
    pids: dict[str, int]


_DAEMONS = {b"org.apache.spark.deploy.master.Master", b"org.apache.spark.deploy.worker.Worker"}


def _is_spark_daemon(pid: int) -> bool:
    """Whether ``pid`` runs a Spark master or worker, not some process that got a dead one's pid.

    (A driver runs ``org.apache.spark.deploy.SparkSubmit``: the class names are matched whole.)
    """
    return not _DAEMONS.isdisjoint(command_line(pid) or [])


class LocalSparkCluster:
    """A standalone master and ``workers`` workers on 127.0.0.1.

    Args:
        port: The master's port.
        ui_port: Its web UI's port, which answers the cluster's state as JSON (default ``port + 1``).
        workers: How many workers.
        cores: Cores each worker offers.
        memory: Memory each worker offers (executors take 1g each by default).
        state_dir: Pid files, logs and the workers' work folders (default ``$DELTAFLOW_HOME/cluster``).
        java_options: ``JDK_JAVA_OPTIONS`` of the master, the workers and the executors they start
            (default: the caller's environment).

    """

    def __init__(self, port: int = DEFAULT_PORT, workers: int = 2, cores: int = 1, memory: str = "2g",
                 state_dir: Path | None = None, ui_port: int | None = None, java_options: str | None = None
                 ) -> None:
        self.port, self.workers, self.cores, self.memory = port, workers, cores, memory
        self.java_options = java_options
        self.ui_port = ui_port or port + 1
        self.state_dir = (state_dir or home() / "cluster") / str(port)
        self.master = f"spark://{HOST}:{port}"
        self.ui = f"http://{HOST}:{self.ui_port}"

    def _pid_file(self, name: str) -> Path:
        return self.state_dir / f"{name}.pid"

    def _pids(self) -> dict[str, int]:
        found = {p.stem: int(p.read_text()) for p in self.state_dir.glob("*.pid")}
        # a pid gone or a zombie has no command line
        return {name: pid for name, pid in found.items() if _is_spark_daemon(pid)}

    def _alive_workers(self) -> int | None:
        try:
            with urllib.request.urlopen(f"{self.ui}/json/", timeout=2) as answer:
                state = json.loads(answer.read())
        except (urllib.error.URLError, OSError, ValueError):
            return None
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def status(self) -> ClusterState:
        """Whether the master answers, and how many workers are alive."""
        alive = self._alive_workers()
        return ClusterState(self.master, alive is not None, alive or 0, self._pids())

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        import pyspark

        spark_home = Path(pyspark.__file__).parent
        env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": HOST,
               "PYSPARK_PYTHON": sys.executable, "SPARK_LOG_DIR": str(self.state_dir),
               # executors' shuffle and state scratch in the cluster's folder, not /tmp: a killed
               # worker's executor cannot delete its own
               "SPARK_LOCAL_DIRS": str(self.state_dir / "local"),
               # No REST submission server: it takes a fixed port (6066) that a second cluster would want.
               "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
        if self.java_options is not None:  # executors inherit their worker's environment
            env["JDK_JAVA_OPTIONS"] = self.java_options
        with open(self.state_dir / f"{name}.log", "wb") as log:
            proc = subprocess.Popen([str(spark_home / "bin" / "spark-class"), *args], stdout=log,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self._pid_file(name).write_text(str(proc.pid))
        return proc

    def start(self, timeout: float = 90.0) -> str:
        """Start the master and the workers (unless they run); the master's URL once all have registered.

        Raises:
            SetupError: The master or a worker did not come up in time (naming its log).

        """
        state = self.status()  # the master counts a killed worker alive until it times out (a minute)
        if state.workers >= self.workers and len(state.pids) == self.workers + 1:
            return self.master
        self.stop()
        (self.state_dir / "local").mkdir(parents=True, exist_ok=True)
        procs = {"master": self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", HOST,
                                       "--port", str(self.port), "--webui-port", str(self.ui_port))}
        for i in range(self.workers):
            work = self.state_dir / f"worker-{i}"
            procs[f"worker-{i}"] = self._spawn(
                f"worker-{i}", "org.apache.spark.deploy.worker.Worker", self.master, "--host", HOST,
                "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work),
                "--webui-port", "0")
        deadline = time.monotonic() + timeout
        while self.status().workers < self.workers:
            dead = [name for name, proc in procs.items() if proc.poll() is not None]
            if dead or time.monotonic() > deadline:
                name = (dead or ["master"])[0]
                self.stop()
                raise SetupError(f"the Spark {name} at {self.master} did not come up",
                                 hint=f"log: {self.state_dir / (name + '.log')}")
            time.sleep(0.2)
        return self.master

    def kill_worker(self, index: int) -> int:
        """SIGKILL worker ``index`` (its executors die with it); its pid."""
        pid = self._pids()[f"worker-{index}"]
        os.killpg(pid, signal.SIGKILL)
        # Once reaped, its pid may be reused (by any process's thread, even): no later stop may signal it.
        self._pid_file(f"worker-{index}").unlink()
        return pid

    def stop(self) -> bool:
        """Stop the workers and the master; False when nothing was running."""
        pids = self._pids()
        for pid in pids.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while any(not is_zombie(pid) for pid in pids.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in pids.values():
            if not is_zombie(pid):
                with contextlib.suppress(ProcessLookupError):  # it may end between the check and the kill
                    os.killpg(pid, signal.SIGKILL)
        for pid_file in self.state_dir.glob("*.pid"):
            pid_file.unlink()
        return bool(pids)
