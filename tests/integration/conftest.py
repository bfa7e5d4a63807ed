"""The integration tier: Spark plus the servers the project starts itself (one Kafka broker, one Spark
cluster and one Hive Metastore per run; the S3 server is the root conftest's), and the tests that need a
process of their own (SIGKILL, SIGTERM)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from helpers import SHORT_RUN_JVM, free_port, mark_tier

if TYPE_CHECKING:
    from deltaflow.dev.s3_faults import S3Faults
    from deltaflow.dev.spark_cluster import LocalSparkCluster


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
def metastore_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The session's Hive Metastore service (Thrift, its Derby state in a temporary folder)."""
    from deltaflow.dev.metastore import LocalMetastore

    metastore = LocalMetastore(port=free_port(), state_dir=tmp_path_factory.mktemp("metastore"))
    yield metastore.start()
    metastore.stop()


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


@pytest.fixture
def faults(s3_endpoint: str) -> Iterator[S3Faults]:
    """The session's S3 server's fault rules (:mod:`deltaflow.dev.s3_faults`), cleared before and after."""
    from deltaflow.dev.s3_faults import S3Faults

    injector = S3Faults(s3_endpoint)
    injector.clear()
    yield injector
    injector.clear()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Chromium from the OS's packages ('make setup' installs it), one for the session."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for program in ("chromium", "chromedriver"):
        assert shutil.which(program), f"{program} is missing: run 'make setup' (it installs it)"
    options = webdriver.ChromeOptions()
    options.binary_location = str(shutil.which("chromium"))
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,2200", "--disable-background-networking", "--no-first-run"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "SEVERE"})
    driver = webdriver.Chrome(service=Service(str(shutil.which("chromedriver"))), options=options)
    yield driver
    driver.quit()
