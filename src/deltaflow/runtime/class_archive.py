"""A class-data archive of the driver JVM, so that every ``deltaflow run`` after the first starts faster.

A Spark driver loads some 20,000 classes before its first micro-batch, and on a small machine parsing and
verifying them is most of a cold start. ``deltaflow setup`` runs a tiny pipeline once with the JVM's
``-XX:ArchiveClassesAtExit`` (a dynamic CDS archive, JDK 13+); every driver deltaflow starts afterwards maps
that archive with ``-XX:SharedArchiveFile`` instead of loading those classes again: about 10 s less to the
first committed batch on a 2-core machine.

The archive belongs to one JVM build and one set of jars at their paths (the JVM checks the class path it
was recorded with), so its file name is a hash of the ``java``, the pyspark installation and deltaflow's
jars; after an upgrade or in another virtualenv the old one is simply not found (``deltaflow setup`` builds
the new one), and a JVM that cannot use an archive anyway starts without it (``-Xshare:auto``).

Examples:
    >>> from deltaflow.runtime.class_archive import java_options
    >>> java_options()  # doctest: +SKIP
    '-XX:SharedArchiveFile=/root/.cache/deltaflow/jvm/3f2a....jsa -Xshare:auto -Xlog:cds=off ...'

"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from deltaflow.runtime.jars import driver_class_path, home, jar_dir

_QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"
_RECORD = "DELTAFLOW_CLASS_ARCHIVE_RECORD"  # set by build_archive for the one run that records the archive


def _java() -> Path | None:
    java_home = os.environ.get("JAVA_HOME")
    found = Path(java_home) / "bin" / "java" if java_home else None
    if found is None or not found.is_file():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found else None


def archive_file() -> Path | None:
    """Where the archive for this JVM, this pyspark and these jars lives (``None`` without a ``java``)."""
    java = _java()
    if java is None:
        return None
    key = hashlib.sha256(json.dumps(_recorded_with(java)).encode()).hexdigest()[:16]
    return home() / "jvm" / f"{key}.jsa"


def _recorded_with(java: Path) -> list[str]:
    """What an archive depends on: the JVM, pyspark, the jars and the driver's class path, the pipeline.

    The JVM refuses an archive recorded with another class path (deltaflow's local file system first:
    ``session.in_process_local_files``), or when a jar it was recorded from has another size or time.
    """
    import pyspark  # the version and the place only; pyspark's import does not start a JVM

    libjvm = next(java.parent.parent.glob("lib/server/libjvm.so"), java)
    pyspark_dir = Path(pyspark.__file__).parent
    jars = sorted([*(pyspark_dir / "jars").glob("*.jar"), *jar_dir("spark").glob("*.jar")])
    files = hashlib.sha256("".join(f"{j}:{j.stat().st_size}:{j.stat().st_mtime_ns}" for j in jars).encode())
    pipeline = hashlib.sha256(_DEFINITIONS.encode()).hexdigest()[:16]
    return [str(java), str(libjvm.stat().st_mtime_ns), str(pyspark_dir), pyspark.__version__,
            files.hexdigest(), f"extraClassPath={driver_class_path()}", pipeline]


def java_options() -> str:
    """JVM options that map the archive; ``""`` when there is none or ``$DELTAFLOW_CLASS_ARCHIVE`` is 0.

    While :func:`build_archive` runs its pipeline, the options that record the archive instead.
    """
    if recording := os.environ.get(_RECORD):
        return f"-XX:ArchiveClassesAtExit={recording} -Xlog:cds=off -Xlog:cds+dynamic=off"
    if os.environ.get("DELTAFLOW_CLASS_ARCHIVE") == "0":
        return ""
    archive = archive_file()
    return f"-XX:SharedArchiveFile={archive} {_QUIET}" if archive and archive.is_file() else ""


def _remove_orphans(current: Path) -> None:
    """Delete the archives that ``current`` replaces, or whose JVM or pyspark installation is gone."""
    folder, here = current.parent, str(Path(json.loads(current.with_suffix(".json").read_text())[2]))
    for archive in folder.glob("*.jsa"):
        if not archive.with_suffix(".json").is_file():
            archive.unlink(missing_ok=True)
    for record in folder.glob("*.json"):
        try:
            java, _, pyspark_dir, *_ = json.loads(record.read_text())
        except (ValueError, TypeError):
            java, pyspark_dir = "", ""
        replaced = pyspark_dir == here and record.stem != current.stem
        if replaced or not (Path(java).is_file() and Path(pyspark_dir).is_dir()):
            record.with_suffix(".jsa").unlink(missing_ok=True)
            record.unlink(missing_ok=True)


# The pipeline the archive is built from: a file source, an expectation, an append, an auto-CDC MERGE, a
# change feed, a full materialized view, a deduplication within a watermark, and by-window views recomputed
# and incremental, so the classes of each sink kind are in it. (Measured on the orders example: the two
# by-window kinds and the deduplication made a first run 4 % and an incremental one 5 % faster.)
_DEFINITIONS = '''
from pyspark.sql import functions as F

import deltaflow as dp

@dp.table
@dp.expect_or_quarantine("has_id", "id IS NOT NULL")
def bronze():
    return dp.read_files("landing", schema="id STRING, seq BIGINT, n INT, ts TIMESTAMP")

dp.create_streaming_table("latest", table_properties={"delta.enableChangeDataFeed": "true"})
dp.create_auto_cdc_flow(target="latest", source="bronze", keys=["id"], sequence_by="seq")

@dp.table
def audit():
    return dp.read_changes("latest", stream=True)

@dp.materialized_view
def totals():
    return spark.read.table("latest").groupBy("id").agg(F.sum("n").alias("n"))

@dp.table
def deduped():
    return spark.readStream.table("bronze").withWatermark("ts", "1 day").dropDuplicatesWithinWatermark(["id"])

@dp.materialized_view(refresh=dp.by_window("ts", "1 day"))
def daily():
    return (spark.read.table("deduped").groupBy(F.window("ts", "1 day"), "id")
            .agg(F.count("seq").alias("c"), F.sum("n").alias("s"), F.avg("n").alias("a")))

@dp.materialized_view(refresh=dp.by_window("ts", "1 hour"))
def hourly():
    return (spark.read.table("bronze").groupBy(F.window("ts", "1 hour"), "id")
            .agg(F.count("*").alias("c"), F.countDistinct("seq").alias("d"), F.sum("n").alias("s")))
'''


def build_archive(force: bool = False, log: Callable[[str], None] = print) -> Path | None:
    """Run the small pipeline above once in a new driver that writes the archive when it exits.

    A failure here costs only speed: it is logged and ``None`` returned, and runs start without an archive.
    """
    java, archive = _java(), archive_file()
    if java is None or archive is None:
        log("class archive: no 'java' on PATH; skipped")
        return None
    if archive.is_file() and not force:
        log(f"class archive: {archive} already built")
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    started = time.monotonic()
    log("class archive: running a small pipeline once to record the driver's classes...")
    with tempfile.TemporaryDirectory(prefix="deltaflow-archive-") as tmp:
        project = Path(tmp)
        (project / "landing").mkdir()
        (project / "landing" / "0.json").write_text("\n".join(
            json.dumps({"id": str(i % 7) if i % 11 else None, "seq": i, "n": i,
                        "ts": f"2026-01-01T{i % 24:02d}:00:00"}) for i in range(50)))
        (project / "definitions.py").write_text(_DEFINITIONS)
        (project / "deltaflow.yml").write_text("name: class-archive\nstorage: ./storage\n"
                                               "libraries: [definitions.py]\n")
        env = {**os.environ, _RECORD: str(partial)}
        env.pop("JDK_JAVA_OPTIONS", None)  # a dump records the flags it ran with; use none of the caller's
        proc = subprocess.run([sys.executable, "-m", "deltaflow", "run", "--available-now", "--quiet",
                               "--spec", str(project)], capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        last = (proc.stderr.strip().splitlines() or ["no archive written"])[-1]
        log(f"class archive: not built ({last[:300]}); runs start without one")
        return None
    partial.replace(archive)
    archive.with_suffix(".json").write_text(json.dumps(_recorded_with(java)))
    _remove_orphans(archive)
    size = archive.stat().st_size / 2**20
    log(f"class archive: {archive} ({size:,.0f} MiB, {time.monotonic() - started:.0f} s)")
    return archive
