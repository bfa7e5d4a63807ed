"""Every benchmark's figures in one shape, saved beside the benchmarks for the report (``report.py``).

A benchmark ends with :func:`save`: its figures, each deltaflow against what it replaces (a hand-written
job, a bare SparkSession start, Spark Declarative Pipelines), measured in the same run, plus the machine
and the versions. ``results/<name>.json`` is overwritten; ``report.py`` turns every saved file into
``REPORT.md``, ``REPORT.json`` and the freshness chart.

    save("cdc_merge", "Auto CDC upserts", [Figure("MERGE throughput, 1 % of keys", "rows/s",
         ours, theirs, "hand-written foreachBatch MERGE", higher_is_better=True, target=1.2)])
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
PACKAGES = ("deltaflow", "pyspark", "delta-spark", "deltalake", "confluent-kafka", "pyarrow")


@dataclass
class Figure:
    """One comparison: deltaflow's samples against the baseline's, measured in the same run.

    ``advantage`` is how many times better deltaflow does (above 1: deltaflow better), whichever way the
    unit points; ``target`` is the advantage the issue asks for (``None``: no target, shown for context).
    """

    what: str
    unit: str
    deltaflow: list[float]
    baseline: list[float]
    against: str
    higher_is_better: bool
    target: float | None = None
    target_text: str = ""  # the target as the issue words it, e.g. "≤ 1.5× a bare SparkSession start"
    note: str = ""
    # deltaflow's figure bounds its value from above (e.g. "fell behind at every rate tried, so below it"):
    # the advantage is at most the one computed, and no target is met on it
    upper_bound: bool = False

    @property
    def advantage(self) -> float:
        ours, theirs = statistics.median(self.deltaflow), statistics.median(self.baseline)
        return ours / theirs if self.higher_is_better else theirs / ours

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.advantage >= self.target and not self.upper_bound

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "advantage": round(self.advantage, 4), "met": self.met}


def need(module: str, what: str) -> None:
    """Stop in one line when ``module`` (a benchmark extra, not installed by ``make setup``) is missing."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise SystemExit(f"{what} needs the Python package '{module}': .venv/bin/pip install -e '.[bench]' "
                         "('make bench' installs it)")


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{platform.machine()}, {os.cpu_count()} cores, {memory:.0f} GiB RAM, {platform.system()} "
            f"{platform.release()}")


def machine_line() -> str:
    """The machine and its load average now (printed at a benchmark's start)."""
    return f"{machine()}; load average at start {', '.join(f'{x:.1f}' for x in os.getloadavg())}"


def java_version() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else "java"
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except OSError:
        return "?"
    first = out.splitlines()[0] if out else ""
    return first.split('"')[1] if first.count('"') >= 2 else first


def versions_line(spark: Any = None) -> str:
    """Python, Java (the session's when given) and the packages that decide the figures."""
    java = (spark.sparkContext._jvm.java.lang.System.getProperty("java.version") if spark is not None
            else java_version())
    from deltaflow.runtime.jars import jar_dir

    kafka = sorted(jar_dir("kafka-broker").glob("kafka_2.13-*.jar"))
    broker = kafka[0].name.removeprefix("kafka_2.13-").removesuffix(".jar") if kafka else "?"
    packages = ", ".join(f"{name} {version(name)}" for name in PACKAGES)
    return f"Python {platform.python_version()}, Java {java}, Kafka broker {broker}, {packages}"


def save(name: str, title: str, figures: list[Figure], notes: list[str] | None = None,
         data: dict[str, Any] | None = None) -> Path:
    """Write ``results/<name>.json`` for the report and print where it went.

    Args:
        name: The benchmark's file name without ``.py``.
        title: One line: what is compared.
        figures: The comparisons, deltaflow first.
        notes: Sentences the report prints under the figures (what differs between the contestants).
        data: Raw measurements a chart needs (the freshness samples).

    Example:
        >>> save("demo", "a demo", [Figure("rate", "rows/s", [2.0], [1.0], "x", True)])  # doctest: +SKIP
    """
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    document = {
        "name": name,
        "title": title,
        "command": " ".join(["python", f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]]),
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": versions_line(),
        "figures": [f.as_json() for f in figures],
        "notes": notes or [],
        "data": data or {},
    }
    path.write_text(json.dumps(document, indent=1) + "\n")
    print(f"\nsaved {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    return path
