"""Helpers shared by tests: free ports, pipeline projects on disk, CLI subprocess environment."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from deltaflow.pipeline import Pipeline
    from deltaflow.runtime.outcomes import FlowOutcome
    from deltaflow.spec import S3Spec
    from deltaflow.storage import StorageLayout


#: A project's definitions: ``accounts``, an auto CDC flow over the files dropped in ``landing``.
AUTO_CDC = """
import deltaflow as dp
from pyspark.sql import functions as F

@dp.table
def changes():
    return dp.read_files("landing", schema="id INT, seq INT, op STRING")

dp.create_streaming_table("accounts")
dp.create_auto_cdc_flow(target="accounts", source="changes", keys=["id"], sequence_by="seq",
                        apply_as_deletes="op = 'DELETE'")
"""


def mark_tier(items: list[Any], folder: Path, marker: str) -> None:
    """Give every test collected under ``folder`` its tier's ``marker`` (markers follow the directory)."""
    import pytest

    for item in items:
        if folder in item.path.parents:
            item.add_marker(getattr(pytest.mark, marker))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Project:
    """A pipeline project on disk: deltaflow.yml + one definitions file (storage local, or on S3)."""

    def __init__(self, root: Path, definitions: str, spec_extra: str = "", bootstrap: str = "",
                 s3: tuple[str, S3Spec] | None = None) -> None:
        self.root = root
        (root / "transformations").mkdir(parents=True, exist_ok=True)
        (root / "transformations" / "defs.py").write_text(textwrap.dedent(definitions))
        kafka = f"kafka:\n  bootstrap_servers: {bootstrap}\n" if bootstrap else ""
        storage = "./storage"
        if s3 is not None:
            storage, keys = s3[0], s3[1]
            kafka += (f"s3: {{endpoint: '{keys.endpoint}', access_key: {keys.access_key}, "
                      f"secret_key: {keys.secret_key}, path_style: true, "
                      f"retry_budget: '{keys.retry_budget}'}}\n")
        (root / "deltaflow.yml").write_text(
            f"name: test\nstorage: {storage}\nlibraries: [transformations/*.py]\n{kafka}{spec_extra}")
        self.spec_path = root / "deltaflow.yml"
        self.storage = root / "storage"
        self.s3 = s3

    @property
    def layout(self) -> StorageLayout:
        from deltaflow.storage import StorageLayout

        if self.s3 is not None:
            return StorageLayout(*self.s3)
        return StorageLayout(str(self.storage.resolve()))

    def rows(self, table: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
        """The rows of ``table`` (``columns``, or all), read with deltalake's query engine (no Spark),
        wherever the storage is.

        The query engine applies deletion vectors, which ``to_pyarrow_table`` refuses.
        """
        from deltaflow.commands.tables import query_rows

        layout = self.layout
        delta = layout.open_table(layout.table(table))
        return query_rows(delta, columns or delta.schema().to_arrow().names)

    def pipeline(self, spark: SparkSession | None = None) -> Pipeline:
        from deltaflow.pipeline import Pipeline

        return Pipeline.load(self.spec_path, spark=spark)

    def table(self, name: str) -> str:
        return self.layout.table(name)

    def drop(self, name: str, records: list[dict[str, Any]], folder: str = "landing") -> None:
        """Drop a JSON-lines file into the project's ``folder`` (it appears atomically)."""
        from deltaflow.dev.sample_data import write_json_lines

        (self.root / folder).mkdir(exist_ok=True)
        write_json_lines(self.root / folder, name, records)

    def checkpoint(self, dataset: str, flow: str | None = None, generation: int = 0) -> Path:
        return Path(self.layout.checkpoint(dataset, flow or dataset, generation).path)

    def rows_read(self, flow: str) -> int:
        """The rows ``flow``'s batches read, as the event log has them (and `status`, the metrics)."""
        log = self.layout.open_table(self.layout.event_log).to_pyarrow_table().to_pylist()
        return sum(e["input_rows"] for e in log if e["flow"] == flow and e["kind"] == "batch")

    def run(self, spark: SparkSession, mode: str = "available_now") -> list[FlowOutcome]:
        return self.pipeline(spark).run(mode)  # type: ignore[arg-type]


#: The JVM options of the tests' short-lived JVMs (`deltaflow` subprocesses, the cluster's processes). They
#: live seconds to a minute: a JVM that skips C2 compilation and uses the serial collector does that short
#: work in ~20 % less time on two cores (test_exactly_once: 192 -> 152 s). C1 alone keeps its code in the
#: non-tiered 48 MB code cache, which a run fills in about a minute (then "Out of space in CodeCache" fails
#: a flow): reserve what tiered compilation would. The session's own JVM keeps the defaults (C1 only made
#: the Spark tier 16 % slower: 376 -> 436 s).
SHORT_RUN_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m"

#: Spark settings of every driver the tests start (the session's, the `deltaflow` subprocesses'). The tests
#: run many small queries, each of another shape, over a few rows: compiling each plan to Java (whole-stage
#: and expression code generation) costs more than it saves, and adaptive execution plans each shuffle
#: twice. Spark gives the same results either way; the soak test runs deltaflow's defaults. With these and
#: the parallel collector in the session's JVM, test_cdc + test_incremental_views + test_medallion took
#: 171 and 187 s instead of 212 and 234 s.
TEST_SPARK_CONF = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN",
                   "spark.sql.adaptive.enabled": "false"}


def cli_env() -> dict[str, str]:
    """Environment for `deltaflow` subprocesses (killed or signalled): this venv first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    # a driver's SparkConf takes the JVM's spark.* system properties
    env["JDK_JAVA_OPTIONS"] = " ".join([SHORT_RUN_JVM, *(f"-D{k}={v}" for k, v in TEST_SPARK_CONF.items())])
    return env


# -- long runs' input rates ------------------------------------------------------------------------------

#: What ``benchmarks/freshness.py`` measured on this machine (``make bench`` writes it).
FRESHNESS_RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "freshness.json"


def sustainable_rate(default: int) -> tuple[int, str]:
    """The clickstream pipeline's highest sustainable rate measured on this machine, and where it came from.

    The freshness benchmark's figure (trigger 0, the whole pipeline keeping up); ``default`` when the
    benchmark has not run here.
    """
    if FRESHNESS_RESULTS.is_file():
        for figure in json.loads(FRESHNESS_RESULTS.read_text())["figures"]:
            if figure["what"].startswith("highest sustainable rate"):
                return int(figure["deltaflow"][0]), f"measured: {FRESHNESS_RESULTS.name}"
    return default, "benchmarks/freshness.py has not run here: a default"


# -- crashing `deltaflow run` subprocesses ---------------------------------------------------------------


def batch_ids(folder: Path) -> set[int]:
    return {int(p.name) for p in folder.glob("*") if p.name.isdigit()} if folder.is_dir() else set()


def in_flight(checkpoint: Path) -> set[int]:
    """Batches whose offsets are logged but whose commit is not: being written right now."""
    return batch_ids(checkpoint / "offsets") - batch_ids(checkpoint / "commits")


def wait_for(condition: Callable[[], object], timeout: float, what: str, proc: subprocess.Popen[bytes],
             log: Path, every: float = 0.02) -> None:
    """Until ``condition()`` holds, checked ``every`` seconds (a batch in flight lasts far longer; polling
    faster only takes cores from the process under test, and on S3 loads the server with LISTs)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            tail = log.read_text()[-2000:]
            raise AssertionError(f"deltaflow exited ({proc.returncode}) before {what}: {tail}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    wait_group_gone(proc, "process group survived SIGKILL")


def wait_group_gone(proc: subprocess.Popen[Any], what: str, timeout: float = 30) -> None:
    """Until no process of ``proc``'s group is left (its JVM included); else fail with ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)
    raise AssertionError(what)


def cli(capsys: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``deltaflow ARGS`` in this process (on the session's Spark, if it needs one), like a subprocess."""
    from deltaflow.cli.main import invoke

    capsys.readouterr()
    code = invoke(list(args))
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(["deltaflow", *args], code, captured.out, captured.err)


class SparkStarted(BaseException):
    """Raised where pyspark would start (or join) a JVM (the unit tier's ``no_jvm`` fixture)."""
