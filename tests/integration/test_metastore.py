"""A pipeline's tables by name through a real Hive Metastore (issue 76): another Spark application, in a
process of its own and configured only with the metastore's URI and Delta, reads ``database.table`` while
`deltaflow run --continuous` writes it, after it stops, after a full refresh and after a rewind; a second
pipeline that would write under a name the first registered is refused in one line, before it writes. The
embedded metastore (Derby under the storage) needs nothing started, and a run goes on while a notebook
holds it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from helpers import Project, cli_env, wait_for

PIPELINE = """
import deltaflow as dp
from pyspark.sql import functions as F

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING, action STRING")

@dp.materialized_view
def gold():
    return spark.read.table("bronze").groupBy("action").agg(F.count("*").alias("events"))
"""

#: The columns compared (bronze's ingestion time prints differently from each engine).
COLUMNS = {"bronze": ["id", "action"], "gold": ["action", "events"]}

#: Another Spark application: Delta's jars and settings and the metastore's URI, nothing of deltaflow's.
READER = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    jars, uri = sys.argv[1], sys.argv[2]
    spark = (SparkSession.builder.master("local[1]").config("spark.jars", jars)
             .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
             .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
             .config("spark.sql.catalogImplementation", "hive")
             .config("spark.hadoop.hive.metastore.uris", uri).config("spark.ui.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    print("ready", flush=True)
    for query in sys.stdin:
        print(json.dumps(sorted(json.dumps(list(r)) for r in spark.sql(query).collect())), flush=True)
""")


class Reader:
    """A long-lived Spark process answering queries over tables by name."""

    def __init__(self, uri: str, folder: Path, script_text: str = READER) -> None:
        from deltaflow.runtime.jars import jars

        script = folder / "reader.py"
        script.write_text(script_text)
        self.proc = subprocess.Popen([sys.executable, str(script), ",".join(map(str, jars("spark"))), uri],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, env=cli_env())
        assert self._line() == "ready"

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the reader exited ({self.proc.poll()})"
        return line.strip()

    def read(self, table: str) -> list[str]:
        """``table``'s rows (``shop.gold``: its columns of ``COLUMNS``)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"SELECT {', '.join(COLUMNS[table.split('.')[-1]])} FROM {table}\n")
        self.proc.stdin.flush()
        return list(json.loads(self._line()))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def rows(project: Project, table: str) -> list[str]:
    """``table``'s rows as the reader prints them, read with deltalake (no Spark, no metastore)."""
    return sorted(json.dumps(list(r.values())) for r in project.rows(table, COLUMNS[table]))


def deltaflow(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deltaflow", *args, "--spec", str(project.spec_path)],
                          capture_output=True, text=True, env=cli_env(), timeout=300)


def test_another_spark_application_reads_the_tables_by_name_during_and_after_runs(  # type: ignore[no-untyped-def]
        metastore_uri: str, tmp_path: Path) -> None:
    spec = f"metastore: {{uri: '{metastore_uri}', database: shop}}\n"
    project = Project(tmp_path / "shop", PIPELINE, spec_extra=spec)
    project.drop("0.json", [{"id": f"a{i}", "action": "view" if i % 3 else "buy"} for i in range(9)])
    log = tmp_path / "run.log"
    with open(log, "w") as out:
        run = subprocess.Popen([sys.executable, "-m", "deltaflow", "run", "--continuous", "--spec",
                                str(project.spec_path)], stdout=out, stderr=subprocess.STDOUT, env=cli_env())
    reader: Reader | None = None
    try:
        wait_for(lambda: len(rows_or_none(project, "gold")) == 2, 180, "gold's first rows", run, log,
                 every=0.2)
        wait_for(lambda: "registered shop.bronze" in log.read_text(), 60, "the registration", run, log)
        reader = Reader(metastore_uri, tmp_path)
        assert reader.read("shop.gold") == rows(project, "gold")  # while the run goes on
        project.drop("1.json", [{"id": "b0", "action": "share"}])
        wait_for(lambda: len(rows_or_none(project, "gold")) == 3, 120, "the new action in gold", run, log,
                 every=0.2)
        assert reader.read("shop.gold") == rows(project, "gold")
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=120) == 0, log.read_text()[-2000:]
        assert reader.read("shop.bronze") == rows(project, "bronze") and len(rows(project, "bronze")) == 10

        rewound = deltaflow(project, "rewind", "bronze", "--to-version", "1")  # its first batch
        assert rewound.returncode == 0, rewound.stderr[-2000:]
        assert reader.read("shop.bronze") == rows(project, "bronze") and len(rows(project, "bronze")) == 9

        refreshed = deltaflow(project, "run", "--available-now", "--full-refresh", "bronze")
        assert refreshed.returncode == 0, refreshed.stderr[-2000:]
        assert reader.read("shop.bronze") == rows(project, "bronze") and len(rows(project, "bronze")) == 10
        assert reader.read("shop.gold") == rows(project, "gold")

        # another pipeline, the same database: every name it would take is this one's
        other = Project(tmp_path / "other", PIPELINE, spec_extra=spec)
        other.drop("0.json", [{"id": "x", "action": "view"}])
        refused = deltaflow(other, "run", "--available-now")
        assert refused.returncode == 1
        error = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
        assert len(error) == 1 and "table 'shop.bronze' in the metastore" in error[0], refused.stderr
        assert str(project.table("bronze")) in error[0] and str(other.table("bronze")) in error[0]
        assert not (other.storage / "tables").exists()  # refused before anything was written
        assert reader.read("shop.bronze") == rows(project, "bronze")  # still the first pipeline's
    finally:
        if run.poll() is None:
            run.kill()
        if reader is not None:
            reader.close()


def rows_or_none(project: Project, table: str) -> list[dict[str, Any]]:
    try:
        return project.rows(table)
    except Exception:  # not created yet
        return []


#: A notebook on the embedded metastore: Delta, Hive support and the Derby database under the storage.
EMBEDDED_READER = READER.replace(
    '.config("spark.hadoop.hive.metastore.uris", uri)',
    '.config("spark.hadoop.javax.jdo.option.ConnectionURL", f"jdbc:derby:;databaseName={uri}")')


def test_an_embedded_metastore_needs_nothing_started_and_a_run_goes_on_while_a_notebook_holds_it(  # type: ignore[no-untyped-def]
        tmp_path: Path) -> None:
    project = Project(tmp_path / "shop", PIPELINE, spec_extra="metastore: {database: shop}\n")
    project.drop("0.json", [{"id": f"a{i}", "action": "view" if i % 3 else "buy"} for i in range(9)])
    first = deltaflow(project, "run", "--available-now")
    assert first.returncode == 0, first.stderr[-2000:]
    assert "registered shop.bronze, shop.gold" in first.stderr, first.stderr
    assert not (project.root / "derby.log").exists()  # Derby's log is beside its database

    reader = Reader(f"{project.layout.metastore}/db", tmp_path, EMBEDDED_READER)  # holds Derby from now on
    try:
        assert reader.read("shop.gold") == rows(project, "gold")
        project.drop("1.json", [{"id": "b0", "action": "share"}])
        second = deltaflow(project, "run", "--available-now")  # Derby is the notebook's: the run goes on
        assert second.returncode == 0, second.stderr[-2000:]
        assert "in use by another Spark application" in second.stderr, second.stderr
        assert len(rows(project, "gold")) == 3 and len(rows(project, "bronze")) == 10
        assert reader.read("shop.gold") == rows(project, "gold")  # registered once, read as it is now
    finally:
        reader.close()
