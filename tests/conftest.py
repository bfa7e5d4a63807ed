"""Fixtures every tier shares: one SparkSession and one local S3 server for the whole run (each started on
first use), and pipeline projects on disk or on S3.

Each tier's ``conftest.py`` marks its own tests (``unit``, ``spark``, ``integration``), so markers follow
the directory: ``pytest -m unit`` is ``make test-fast``. The SparkSession starts on first use, so the unit
tier never starts a JVM.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from helpers import TEST_SPARK_CONF, Project, free_port

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from deltaflow.spec import S3Spec


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    from deltaflow.runtime.session import build_session, driver_java_options

    warehouse = tmp_path_factory.mktemp("warehouse")
    # the parallel collector: a long-lived JVM's throughput, without G1's concurrent threads on two cores
    jvm = f"{driver_java_options()} -XX:+UseParallelGC"
    session = build_session(extra={"spark.sql.warehouse.dir": str(warehouse),
                                   "spark.sql.shuffle.partitions": "2", "spark.driver.extraJavaOptions": jvm,
                                   **TEST_SPARK_CONF})
    yield session
    session.stop()


@pytest.fixture
def make_project(tmp_path: Path) -> Callable[..., Project]:
    def make(definitions: str, spec_extra: str = "", bootstrap: str = "", name: str = "project",
             s3: tuple[str, S3Spec] | None = None) -> Project:
        return Project(tmp_path / name, definitions, spec_extra, bootstrap, s3=s3)

    return make


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The session's local S3 server (moto), with bucket ``lake``."""
    from deltaflow.dev.s3_server import LocalS3

    server = LocalS3(port=free_port(), state_dir=tmp_path_factory.mktemp("s3"))
    endpoint = server.start(["lake"])
    yield endpoint
    server.stop()


@pytest.fixture
def s3_spec(s3_endpoint: str) -> S3Spec:
    from deltaflow.dev.s3_server import ACCESS_KEY, SECRET_KEY
    from deltaflow.spec import S3Spec

    return S3Spec(endpoint=s3_endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY, path_style=True)


@pytest.fixture
def s3_root(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A prefix in a fresh bucket of the test's own; the examples' ``s3:`` keys point at the session's server.

    A bucket per test, not a prefix in a shared one: moto reads every key of a bucket to answer a LIST, and
    Delta and S3A list all the time, so a shared bucket would slow each test down as the run goes on.
    """
    import uuid

    from deltaflow.dev.s3_server import LocalS3

    bucket = f"t-{uuid.uuid4().hex[:12]}"
    LocalS3.create_buckets_at(s3_endpoint, [bucket])
    monkeypatch.setenv("DELTAFLOW_S3_ENDPOINT", s3_endpoint)
    return f"s3a://{bucket}/p"


@pytest.fixture(params=["local", "s3"])
def storage(request: pytest.FixtureRequest) -> tuple[str, S3Spec] | None:
    """Run the test twice: storage on local disk (None), and in a fresh bucket of the local S3 server
    (the ``s3=`` of :class:`~helpers.Project`)."""
    if request.param == "local":
        return None
    return request.getfixturevalue("s3_root"), request.getfixturevalue("s3_spec")
