"""Pipelines on the local S3 server (moto) and the standalone cluster: the same tables as locally, the same
guarantees across a SIGKILL, one writing run per table, and several drivers committing to one table.

Tables are read back with ``deltalake`` through the layout's storage options (no Spark).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from deltaflow.pipeline import Pipeline
from deltaflow.storage import StorageLayout
from helpers import cli, cli_env, kill_group, wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# Columns a run fills with its own clock: the same input gives other values on every run, on any storage.
RUN_CLOCK = {"ingested_at", "processed_at", "_commit_timestamp"}


def table_rows(layout: StorageLayout, name: str) -> list[tuple[Any, ...]]:
    """Every row of ``name``, as sorted tuples of its columns (minus the run's clock)."""
    data = layout.open_table(layout.table(name)).to_pyarrow_table()
    columns = sorted(c for c in data.column_names if c not in RUN_CLOCK)
    return sorted(tuple(str(r[c]) for c in columns) for r in data.select(columns).to_pylist())


def start_run(project: Path, mode: str, log: Path) -> subprocess.Popen[bytes]:
    """``deltaflow run --MODE`` of ``project`` as a process group of its own (a SIGKILL takes its JVM too)."""
    with log.open("wb") as out:
        command = [sys.executable, "-m", "deltaflow", "run", f"--{mode}", "--spec", str(project)]
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=cli_env(),
                                start_new_session=True)


@pytest.mark.cluster
@pytest.mark.parametrize("example", ["clickstream", "customers_cdc"])
def test_an_example_on_the_cluster_and_s3_gives_the_tables_it_gives_locally(
        example: str, spark: Any, kafka_bootstrap: str, s3_root: str, spark_cluster: Any, spark_master: str,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same project, unchanged: in this process on local disk, then as `deltaflow run` on the
    standalone cluster (a master, two workers and their executors: other processes) with storage on S3.

    During the customers_cdc run a worker is SIGKILLed (its executor with it) once the first batch has
    committed: Spark runs the lost tasks again on the other worker, and the tables, compared row by row
    (duplicates included), are still the local run's.
    """
    import urllib.request

    from deltaflow.dev.generator import clickstream_event, field_key, produce, user_key
    from deltaflow.dev.sample_data import customer_changes
    from deltaflow.dev.topics import create_topic

    monkeypatch.setenv("DELTAFLOW_KAFKA", kafka_bootstrap)
    if example == "clickstream":
        topic = "clicks"  # the example's own topic: both runs read all of it
        create_topic(kafka_bootstrap, topic, partitions=3)
        rng = random.Random(13)
        now = datetime.now(UTC)
        produce(kafka_bootstrap, topic, [clickstream_event(rng, now) for _ in range(400)], user_key)
    else:
        topic = f"customer-changes-{uuid.uuid4().hex[:8]}"
        monkeypatch.setenv("DELTAFLOW_TOPIC", topic)
        create_topic(kafka_bootstrap, topic, partitions=3)
        produce(kafka_bootstrap, topic, customer_changes(60, 800, seed=7, disorder=20, duplicates=0.05),
                key_fn=field_key("customer_id"))

    monkeypatch.setenv("DELTAFLOW_STORAGE", str(tmp_path / "storage"))
    local = Pipeline.load(EXAMPLES / example, spark=spark)
    monkeypatch.setenv("DELTAFLOW_STORAGE", s3_root)
    monkeypatch.setenv("DELTAFLOW_SPARK_MASTER", spark_master)
    s3 = Pipeline.load(EXAMPLES / example).layout
    assert s3.root == s3_root and local.layout.root != s3_root
    log = tmp_path / "cluster-run.log"
    proc = start_run(EXAMPLES / example, "available-now", log)
    # the local run goes on in this process meanwhile (the cluster's run leaves a core partly idle)
    with ThreadPoolExecutor(1) as here:
        local_run = here.submit(local.run, "available_now")
        try:
            if example == "customers_cdc":
                first = s3.checkpoint("customers", "customers", 0).path
                wait_for(lambda: [n for n in s3.fs.list(f"{first}/commits") if n.isdigit()], 300,
                         "a committed customers batch", proc, log, every=0.1)
                spark_cluster.kill_worker(0)  # batches of the other flows are running or about to
                assert "worker-0" not in spark_cluster.status().pids  # no later stop signals its pid
            assert proc.wait(timeout=600) == 0, log.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                kill_group(proc)
        assert {o.state for o in local_run.result()} == {"completed"}

    def cluster_apps() -> set[str]:  # the master lists an application as completed once it sees it end
        with urllib.request.urlopen(f"{spark_cluster.ui}/json/") as answer:
            return {a["name"] for a in json.loads(answer.read())["completedapps"]}

    deadline = time.monotonic() + 60
    while f"deltaflow:{example}" not in cluster_apps() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert f"deltaflow:{example}" in cluster_apps(), "the run was the cluster's application"

    names = local.layout.table_names()
    assert s3.table_names() == names and len(names) >= 3
    for name in names:
        rows = table_rows(local.layout, name)
        assert rows, f"{example}: {name} is empty"
        assert table_rows(s3, name) == rows, f"{example}: {name} differs on the cluster and S3"


# -- one writing run per table, and a SIGKILL, on S3 --------------------------------------------------------

LEASED = '''\
import deltaflow as dp
from pyspark.sql import functions as F


@dp.table
def bronze():
    return dp.read_kafka({topic!r}, max_offsets_per_trigger=100)


@dp.table
def silver():
    return (spark.readStream.table("bronze")
            .select(F.get_json_object("value", "$.id").cast("long").alias("id"), "partition", "offset"))
'''


def s3_project(root: Path, storage: str, endpoint: str, definitions: str, extra: str = "") -> Path:
    """A project whose storage is on the local S3 server."""
    from deltaflow.dev.s3_server import ACCESS_KEY, SECRET_KEY

    (root / "transformations").mkdir(parents=True)
    (root / "transformations" / "defs.py").write_text(definitions)
    (root / "deltaflow.yml").write_text(textwrap.dedent(f"""\
        name: leased
        storage: {storage}
        libraries: [transformations/*.py]
        s3: {{endpoint: "{endpoint}", access_key: {ACCESS_KEY}, secret_key: {SECRET_KEY}, path_style: true}}
        """) + extra)
    return root


def assert_each_event_once(layout: StorageLayout, count: int) -> None:
    """Each of the ``count`` produced ids is in bronze (as Kafka's value) and in silver exactly once."""
    for name in ("bronze", "silver"):
        data = layout.open_table(layout.table(name)).to_pyarrow_table().to_pylist()
        ids = Counter(json.loads(r["value"])["id"] if name == "bronze" else r["id"] for r in data)
        assert ids == Counter(range(count)), f"{name}: each produced event exactly once"


def test_a_run_killed_mid_batch_on_s3_holds_its_tables_until_the_next_run_takes_them(
        spark: Any, kafka_bootstrap: str, s3_root: str, s3_endpoint: str, tmp_path: Path,
        capsys: Any) -> None:
    from deltaflow.dev.generator import produce
    from deltaflow.dev.topics import create_topic

    topic = f"leased-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, partitions=2)
    project = s3_project(tmp_path / "p", s3_root, s3_endpoint, LEASED.format(topic=topic),
                         f"kafka: {{bootstrap_servers: '{kafka_bootstrap}'}}\n")
    produce(kafka_bootstrap, topic, [{"id": i} for i in range(600)])
    pipeline = Pipeline.load(project, spark=spark)
    layout = pipeline.layout
    checkpoint = layout.checkpoint("bronze", "bronze", 0).path

    def batches(kind: str) -> set[int]:
        return {int(n) for n in layout.fs.list(f"{checkpoint}/{kind}") if n.isdigit()}

    log = tmp_path / "run.log"
    proc = start_run(project, "continuous", log)
    try:
        wait_for(lambda: batches("commits") and batches("offsets") - batches("commits"), 240,
                 "a batch in flight after a committed one", proc, log, every=0.1)
        refused = cli(capsys, "run", "--available-now", "--spec", str(project))
        assert refused.returncode == 1
        line = refused.stderr.strip().splitlines()[-1]  # after the run's header line
        assert line.startswith("error: DF-LEASE table 'bronze' is held by pipeline 'leased' run "), line
        assert f"(pid {proc.pid} on " in line
    finally:
        kill_group(proc)

    holder = json.loads(layout.fs.read_text(layout.lease("silver")) or "{}")
    assert holder["pid"] == proc.pid
    # The killed run's lease has not run out, but its process is gone from this machine: the next run
    # takes its tables over at once (a holder on another machine is waited for until its ttl passes).
    assert time.time() < holder["expires"]
    produce(kafka_bootstrap, topic, [{"id": i} for i in range(600, 800)])
    outcomes = Pipeline.load(project, spark=spark).run("available_now")
    assert {o.state for o in outcomes} == {"completed"}
    assert json.loads(layout.fs.read_text(layout.lease("silver")) or "{}")["expires"] == 0  # given back

    assert_each_event_once(layout, 800)


# -- several drivers, one S3 table -------------------------------------------------------------------------

WRITER = '''\
import sys, time
from pathlib import Path
from deltaflow.runtime.session import build_session
from deltaflow.spec import S3Spec
from deltaflow.storage.s3 import hadoop_conf

endpoint, table, writer, commits, rows, ready, others = sys.argv[1:8]
s3 = S3Spec(endpoint=endpoint, access_key="deltaflow", secret_key="deltaflow-secret", path_style=True)
spark = build_session(extra={**hadoop_conf(s3), "spark.sql.shuffle.partitions": "1"})
Path(ready).write_text("ready")
while not all(Path(o).exists() for o in others.split(",")):  # start committing together
    time.sleep(0.01)
for commit in range(int(commits)):
    first = commit * int(rows)
    (spark.range(first, first + int(rows), numPartitions=1).selectExpr(f"'{writer}' AS writer", "id")
     .write.format("delta").mode("append").save(table))
'''


def test_two_drivers_committing_to_one_s3_table_lose_no_commit(s3_root: str, s3_spec: Any,
                                                              tmp_path: Path) -> None:
    """20 commits of 100 rows from each of two driver processes, at once: Delta's optimistic commits, with
    the conditional PUT under :class:`S3ConditionalLogStore`, give 40 contiguous versions and every row."""
    import pyarrow as pa
    from deltalake import write_deltalake

    table, layout = f"{s3_root}/shared", StorageLayout(s3_root, s3_spec)
    writers, commits, rows = ("a", "b"), 20, 100
    # Created first, as deltaflow creates its tables before any flow writes (two drivers creating one table
    # at once is refused by Delta: DELTA_PROTOCOL_CHANGED).
    empty = pa.table({"writer": pa.array([], pa.string()), "id": pa.array([], pa.int64())})
    write_deltalake(table, empty, storage_options=layout.storage_options)
    ready = {w: tmp_path / f"{w}.ready" for w in writers}
    procs = {}
    for w in writers:
        log = (tmp_path / f"{w}.log").open("wb")
        args = [s3_spec.endpoint, table, w, str(commits), str(rows), str(ready[w]),
                ",".join(str(ready[o]) for o in writers if o != w)]
        procs[w] = subprocess.Popen([sys.executable, "-c", WRITER, *args], stdout=log,
                                    stderr=subprocess.STDOUT, env=cli_env(), start_new_session=True)
    for w, proc in procs.items():
        assert proc.wait(timeout=600) == 0, (tmp_path / f"{w}.log").read_text()[-3000:]

    delta = layout.open_table(table)
    versions = sorted(h["version"] for h in delta.history())
    assert versions == list(range(1 + len(writers) * commits)), "one version per commit, none lost or skipped"
    data = delta.to_pyarrow_table().to_pylist()
    assert Counter((r["writer"], r["id"]) for r in data) == Counter(
        (w, i) for w in writers for i in range(commits * rows))
