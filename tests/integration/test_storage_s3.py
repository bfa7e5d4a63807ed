"""deltaflow's own files and table leases on the local S3 server and on local disk, without a JVM.

The leases are the guard of "one writing run per table": each test runs on both stores, since the
compare-and-swap under them is a conditional PUT on S3 and a locked read-compare-write on disk.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from deltaflow.errors import LeaseError, StorageError
from deltaflow.spec import S3Spec
from deltaflow.storage import StorageLayout
from deltaflow.storage.lease import TableLeases
from helpers import cli


@pytest.fixture(params=["local", "s3"])
def layout(request: pytest.FixtureRequest, tmp_path: Path) -> StorageLayout:
    if request.param == "local":
        return StorageLayout(str(tmp_path / "storage"))
    return StorageLayout(request.getfixturevalue("s3_root"), request.getfixturevalue("s3_spec"))


def test_records_round_trip_list_copy_and_delete(layout: StorageLayout) -> None:
    fs = layout.fs
    record = layout.replay_record("orders")
    assert fs.read_text(record) is None and fs.list(f"{layout.root}/_replay") == []
    fs.write_text(record, '{"a": 1}')
    fs.write_text(layout.rewind_record("orders"), "{}")
    assert fs.read_text(record) == '{"a": 1}'
    assert fs.list(layout.root) == ["_replay", "_rewind"] and layout.rewound_tables() == ["orders"]
    assert fs.is_dir(f"{layout.root}/_replay") and not fs.is_dir(record)
    assert fs.exists(record) and not fs.exists(f"{record}.nope")
    fs.copy(record, f"{layout.root}/copy/r.json")
    assert fs.read_text(f"{layout.root}/copy/r.json") == '{"a": 1}'
    fs.delete_tree(f"{layout.root}/_replay")
    assert fs.read_text(record) is None and not fs.exists(f"{layout.root}/_replay")
    generation = layout.start_generation("silver", "silver", 1)  # an empty folder is seen at once
    assert fs.is_dir(generation.path) and layout.current_generation("silver", "silver") == 1
    assert fs.list(generation.path) == []


def test_a_held_table_is_refused_naming_the_holder_and_nothing_is_taken(layout: StorageLayout) -> None:
    first = TableLeases(layout, "clicks", "run-a", ttl_seconds=60)
    first.acquire(["silver"])
    second = TableLeases(layout, "clicks", "run-b", ttl_seconds=60)
    with pytest.raises(LeaseError) as refused:
        second.acquire(["bronze", "silver"])  # bronze is free, silver is not: neither is taken
    message = str(refused.value)
    assert message.startswith("DF-LEASE table 'silver' is held by pipeline 'clicks' run run-a (pid ")
    assert "\n" not in message
    assert second.tokens == {}
    third = TableLeases(layout, "other", "run-c", ttl_seconds=60)
    third.acquire(["bronze"])  # bronze was given back when run-b was refused
    first.release()
    second.acquire(["silver"])
    assert set(second.tokens) == {"silver"}


def test_a_crashed_holder_is_taken_over_once_its_ttl_passes(layout: StorageLayout) -> None:
    """A holder on another machine (here: this process, alive) is waited for until its ttl passes."""
    now = [1_000_000.0]
    crashed = TableLeases(layout, "p", "crashed", ttl_seconds=30, clock=lambda: now[0])
    crashed.acquire(["gold"])  # never renewed, never released: a SIGKILLed run
    successor = TableLeases(layout, "p", "next", ttl_seconds=30, clock=lambda: now[0])
    now[0] += 29
    with pytest.raises(LeaseError):
        successor.acquire(["gold"])
    now[0] += 2
    successor.acquire(["gold"])
    holder = json.loads(layout.fs.read_text(layout.lease("gold")) or "{}")
    assert (holder["run_id"], holder["expires"]) == ("next", now[0] + 30)
    crashed.renew()  # the crashed run comes back (a long pause): it learns it lost the table
    assert crashed.lost is not None and "lost table 'gold'" in crashed.lost
    assert json.loads(layout.fs.read_text(layout.lease("gold")) or "{}")["run_id"] == "next"


def test_a_holder_whose_process_is_gone_on_this_machine_is_taken_over_at_once(
        layout: StorageLayout) -> None:
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    record = json.loads(TableLeases(layout, "p", "x", 60)._record(time.time() + 60))
    layout.fs.write_text(layout.lease("t"), json.dumps({**record, "run_id": "dead", "pid": int(gone.stdout)}))
    TableLeases(layout, "p", "next", ttl_seconds=60).acquire(["t"])  # the ttl has not passed: pid is gone
    alive = {**record, "run_id": "alive", "pid": os.getpid()}
    layout.fs.write_text(layout.lease("u"), json.dumps(alive))
    with pytest.raises(LeaseError):
        TableLeases(layout, "p", "next", ttl_seconds=60).acquire(["u"])
    elsewhere = {**alive, "machine": "elsewhere", "pid": int(gone.stdout)}
    layout.fs.write_text(layout.lease("u"), json.dumps(elsewhere))
    with pytest.raises(LeaseError):  # another machine's pid says nothing here: wait for its ttl
        TableLeases(layout, "p", "next", ttl_seconds=60).acquire(["u"])


def test_of_runs_racing_for_a_free_table_exactly_one_wins(layout: StorageLayout) -> None:
    runs = [TableLeases(layout, "p", f"run-{i}", ttl_seconds=60) for i in range(8)]
    start = threading.Barrier(len(runs))
    won: list[str] = []

    def race(run: TableLeases) -> None:
        start.wait()
        try:
            run.acquire(["t"])
            won.append(run.run_id)
        except LeaseError:
            pass

    threads = [threading.Thread(target=race, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    assert json.loads(layout.fs.read_text(layout.lease("t")) or "{}")["run_id"] == won[0]


def test_a_holder_renews_in_the_background_and_gives_back_on_release(layout: StorageLayout) -> None:
    holder = TableLeases(layout, "p", "run-a", ttl_seconds=0.6)
    holder.acquire(["t"])
    first = json.loads(layout.fs.read_text(layout.lease("t")) or "{}")["expires"]
    holder.start_renewing()
    deadline = time.monotonic() + 10
    while json.loads(layout.fs.read_text(layout.lease("t")) or "{}")["expires"] == first:
        assert time.monotonic() < deadline, "never renewed"
        time.sleep(0.05)
    holder.release()
    assert json.loads(layout.fs.read_text(layout.lease("t")) or "{}")["expires"] == 0
    TableLeases(layout, "p", "run-b", ttl_seconds=60).acquire(["t"])


def _write_table(layout: StorageLayout, path: str, **columns: list[Any]) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(path, pa.table(columns), mode="append", storage_options=layout.storage_options or None)


def test_history_and_status_read_s3_without_a_jvm(s3_root: str, s3_spec: S3Spec, tmp_path: Path,
                                                  capsys: Any) -> None:
    from deltaflow.runtime.event_log import EventLog, end_event

    endpoint = s3_spec.endpoint
    (tmp_path / "deltaflow.yml").write_text(
        f"name: p\nstorage: {s3_root}\ns3: {{endpoint: '{endpoint}', access_key: k, secret_key: s, "
        "path_style: true}\n")
    layout = StorageLayout(s3_root, s3_spec)
    for i in range(3):
        _write_table(layout, layout.table("t"), x=[i])
    log = EventLog(layout.event_log, "p", storage_options=layout.storage_options)
    log.add(end_event("p", log.run_id, "t", "completed", None))
    log.close()
    assert log.error is None

    history = cli(capsys, "history", "t", "--json", "--spec", str(tmp_path))
    assert history.returncode == 0, history.stderr
    assert [json.loads(line)["version"] for line in history.stdout.splitlines()] == [2, 1, 0]
    status = cli(capsys, "status", "--json", "--spec", str(tmp_path))
    assert status.returncode == 0, status.stderr
    flows = [json.loads(line) for line in status.stdout.splitlines()]
    assert [(f["flow"], f["state"]) for f in flows] == [("t", "completed")]


@pytest.mark.parametrize("problem", ["endpoint", "bucket"])
def test_bad_storage_settings_are_one_line_naming_them_and_nothing_is_written(
        problem: str, s3_endpoint: str, tmp_path: Path, capsys: Any) -> None:
    from helpers import free_port

    endpoint = f"http://127.0.0.1:{free_port()}" if problem == "endpoint" else s3_endpoint
    bucket = "no-such-bucket" if problem == "bucket" else "lake"
    (tmp_path / "deltaflow.yml").write_text(
        f"name: p\nstorage: s3a://{bucket}/p\ns3: {{endpoint: '{endpoint}', access_key: k, secret_key: s, "
        "path_style: true}\n")
    (tmp_path / "transformations").mkdir()
    (tmp_path / "transformations" / "t.py").write_text(
        "import deltaflow as dp\n\n@dp.table\ndef t():\n    return spark.range(3)\n")
    for verb in (["status"], ["history", "t"], ["run"]):
        result = cli(capsys, *verb, "--spec", str(tmp_path))
        assert result.returncode == 1, (verb, result.stdout, result.stderr)
        line = result.stderr.strip()
        assert "\n" not in line and line.startswith("error: DF-STORAGE"), line
        expected = f"no S3 server answers at {endpoint}" if problem == "endpoint" else \
            "bucket 'no-such-bucket' does not exist"
        assert expected in line, line
    if problem == "bucket":
        with pytest.raises(StorageError):
            StorageLayout(f"s3a://{bucket}/p", S3Spec(endpoint=endpoint, path_style=True,
                                                      access_key="k", secret_key="s")).check()


def test_credentials_the_server_refuses_are_one_line_naming_the_keys_and_nothing_is_written(
        tmp_path: Path, capsys: Any) -> None:
    """A server of its own that checks every request's signature (moto's IAM mode): an unknown access key
    and a wrong secret are each refused in one line by every verb; the right pair works."""
    import urllib.request

    import boto3

    from deltaflow.dev.s3_server import ACCESS_KEY, SECRET_KEY, LocalS3
    from helpers import free_port

    server = LocalS3(port=free_port(), state_dir=tmp_path / "server")
    endpoint = server.start(["guarded"])
    try:
        def client(service: str, key: str, secret: str) -> Any:
            return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1",
                                aws_access_key_id=key, aws_secret_access_key=secret)

        # The next three requests create a user and its key; every request after them is checked.
        reset = urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=b"3", method="POST",
                                       headers={"Content-Type": "text/plain"})
        urllib.request.urlopen(reset).close()
        iam = client("iam", ACCESS_KEY, SECRET_KEY)
        iam.create_user(UserName="pipeline")
        iam.put_user_policy(UserName="pipeline", PolicyName="lake", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        issued = iam.create_access_key(UserName="pipeline")["AccessKey"]
        key, secret = issued["AccessKeyId"], issued["SecretAccessKey"]

        (tmp_path / "transformations").mkdir()
        (tmp_path / "transformations" / "t.py").write_text(
            "import deltaflow as dp\n\n@dp.table\ndef t():\n    return spark.range(3)\n")
        for wrong_key, wrong_secret in [(key, secret[::-1]), ("AKIAUNKNOWN000000000", secret)]:
            (tmp_path / "deltaflow.yml").write_text(
                f"name: p\nstorage: s3a://guarded/p\ns3: {{endpoint: '{endpoint}', access_key: {wrong_key}, "
                f"secret_key: {wrong_secret}, path_style: true}}\n")
            for verb in (["status"], ["history", "t"], ["run"]):
                result = cli(capsys, *verb, "--spec", str(tmp_path))
                assert result.returncode == 1, (verb, result.stdout, result.stderr)
                line = result.stderr.strip()
                assert line == ("error: DF-STORAGE s3.access_key / s3.secret_key: storage "
                                f"'s3a://guarded/p': {endpoint} refused the credentials (HTTP 403)"), line
                assert wrong_secret not in line

        good = client("s3", key, secret)
        assert good.list_objects_v2(Bucket="guarded").get("KeyCount") == 0, "nothing written"
        StorageLayout("s3a://guarded/p", S3Spec(endpoint=endpoint, path_style=True, access_key=key,
                                                secret_key=secret)).check()  # the right pair is let in
    finally:
        server.stop()


def test_a_master_that_does_not_answer_is_one_line_naming_it(tmp_path: Path, capsys: Any) -> None:
    from helpers import free_port

    master = f"spark://127.0.0.1:{free_port()}"
    (tmp_path / "deltaflow.yml").write_text(
        f"name: p\nstorage: ./storage\nconfiguration: {{spark.master: '{master}'}}\n")
    (tmp_path / "transformations").mkdir()
    (tmp_path / "transformations" / "t.py").write_text(
        "import deltaflow as dp\n\n@dp.table\ndef t():\n    return spark.range(3)\n")
    result = cli(capsys, "run", "--spec", str(tmp_path))
    assert result.returncode == 1
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("error: DF-CONFIG configuration: spark.master: no Spark master answers at "
                           f"{master}"), line
    assert not (tmp_path / "storage").exists(), "nothing written"
