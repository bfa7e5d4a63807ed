"""The integration tier: Spark plus the servers the project starts itself (one Kafka broker and one S3
server per run), and the tests that need a process of their own (SIGKILL, SIGTERM)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from helpers import SHORT_RUN_JVM, free_port, mark_tier

if TYPE_CHECKING:
    from deltaflow.dev.spark_cluster import LocalSparkCluster
    from deltaflow.spec import S3Spec


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_tier(items, Path(__file__).parent, "integration")


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from deltaflow.dev.broker import EmbeddedKafka

    broker = EmbeddedKafka(state_dir=tmp_path_factory.mktemp("kafka"), port=free_port())
    bootstrap = broker.start()
    yield bootstrap
    broker.stop()


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


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSparkCluster]:
    """The session's Spark standalone cluster: a master and two one-core workers, each a process."""
    from deltaflow.dev.spark_cluster import LocalSparkCluster

    cluster = LocalSparkCluster(port=free_port(), workers=2, cores=1, memory="2g",
                                state_dir=tmp_path_factory.mktemp("cluster"), ui_port=free_port(),
                                java_options=SHORT_RUN_JVM)
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture
def spark_master(spark_cluster: LocalSparkCluster) -> str:
    """The cluster's master URL, with all its workers up (a test may have killed one)."""
    return spark_cluster.start()
