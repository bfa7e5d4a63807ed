"""Run Apache Spark's own Declarative Pipelines (``spark-pipelines``) on a project, to compare with it.

The tests compare deltaflow's tables with SDP's, and ``benchmarks/sdp_orders.py`` times both: each calls
:func:`run_spark_pipelines`. SDP runs through pyspark's ``spark-pipelines`` (spark-submit with a Spark
Connect server inside) with deltaflow's jars and Spark settings, its tables in Delta
(``spark.sql.sources.default``) registered in a Hive metastore on embedded Derby under ``work`` (with
Spark's in-memory catalog a second run cannot find its own tables), in the warehouse ``work/warehouse``.

Examples:
    >>> done = run_spark_pipelines(Path("hello/spark-pipeline.yml"), Path("/tmp/sdp"))  # doctest: +SKIP
    >>> spark_pipelines_table(Path("/tmp/sdp"), "example_sql_materialized_view")  # doctest: +SKIP
    '/tmp/sdp/warehouse/example_sql_materialized_view'

"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def spark_pipelines_env(work: Path, app: str = "SDP", metastore: bool = True) -> dict[str, str]:
    """The environment ``spark-pipelines`` runs in, its ``spark-defaults.conf`` written under ``work``.

    ``metastore``: register the tables in a Hive metastore (on Derby), so that a later run finds them;
    without it (one run, compared once), Spark's in-memory catalog starts seconds sooner.
    """
    from deltaflow.runtime.jars import jars
    from deltaflow.runtime.session import default_conf

    conf = {key: value for key, value in default_conf().items()
            if key not in ("spark.master", "spark.jars", "spark.driver.extraJavaOptions")
            and "logStore" not in key}
    conf.update({
        "spark.app.name": app,
        "spark.sql.sources.default": "delta",  # SDP creates its tables in the default format
        "spark.sql.warehouse.dir": str(work / "warehouse"),
    })
    if metastore:
        conf.update({"spark.sql.catalogImplementation": "hive",
                     "spark.hadoop.javax.jdo.option.ConnectionURL":
                         f"jdbc:derby:;databaseName={work / 'metastore'};create=true"})
    (work / "conf").mkdir(parents=True, exist_ok=True)
    (work / "conf" / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in conf.items()))
    return {**os.environ, "SPARK_CONF_DIR": str(work / "conf"),
            "SPARK_DIST_CLASSPATH": os.pathsep.join(str(j) for j in jars("spark")),
            "SPARK_DRIVER_MEMORY": conf["spark.driver.memory"], "PYSPARK_PYTHON": sys.executable,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def spark_pipelines_command(spec: Path, verb: str = "run") -> list[str]:
    """``spark-pipelines <verb> --spec <spec>``, from the Python environment deltaflow runs in."""
    return [str(Path(sys.executable).parent / "spark-pipelines"), verb, "--spec", str(spec)]


def run_spark_pipelines(spec: Path, work: Path, verb: str = "run", metastore: bool = True,
                        ) -> subprocess.CompletedProcess[str]:
    """Run SDP on the project of ``spec`` in its folder (see the module); its output is captured."""
    env = spark_pipelines_env(work, metastore=metastore)
    return subprocess.run(spark_pipelines_command(spec, verb), env=env, cwd=spec.parent, capture_output=True,
                          text=True, check=False)


def spark_pipelines_table(work: Path, name: str) -> str:
    """Where SDP's run under ``work`` keeps table ``name``."""
    return str(work / "warehouse" / name)
