"""What the embedded Kafka broker runs with: its configuration files and its formatted KRaft storage.

The broker is one node in combined mode (broker + controller) on loopback; :func:`server_properties` holds
its settings, :func:`write_config` writes them with a log4j2 configuration, and :func:`format_storage`
formats the data folder once, so that a restarted broker keeps its topics.

Examples:
    >>> settings = server_properties("127.0.0.1:19092", "127.0.0.1:19093", Path("/tmp/k/data"))
    >>> settings["controller.quorum.voters"]
    '1@127.0.0.1:19093'

"""

from __future__ import annotations

import base64
import subprocess
import uuid
from pathlib import Path

from deltaflow.dev.broker_process import log_summary
from deltaflow.errors import KafkaBrokerError

_TOOL_JVM = ["-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]  # short-lived: starts ~1 s sooner
_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log_file}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = FILE
"""


def server_properties(bootstrap: str, controller: str, data_dir: Path) -> dict[str, str]:
    """The ``server.properties`` settings of a single-node KRaft broker.

    Args:
        bootstrap: ``host:port`` of the client (PLAINTEXT) listener.
        controller: ``host:port`` of the controller listener.
        data_dir: Kafka's ``log.dirs``: topics and KRaft metadata.

    Returns:
        The settings, in the order they are written.

    Examples:
        >>> server_properties("127.0.0.1:19092", "127.0.0.1:19093", Path("/tmp/k/data"))["listeners"]
        'PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093'

    """
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{controller}",
        "listeners": f"PLAINTEXT://{bootstrap},CONTROLLER://{controller}",
        "advertised.listeners": f"PLAINTEXT://{bootstrap}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(data_dir),
        "num.partitions": "1",
        "default.replication.factor": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "5",  # 50 by default: the first consumer group waits for them
        "transaction.state.log.num.partitions": "5",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "true",
        "num.network.threads": "2",
        "num.io.threads": "4",
        "log.cleaner.dedupe.buffer.size": str(32 * 1024 * 1024),
    }


def write_config(
    config_file: Path, log4j2_file: Path, *, bootstrap: str, controller: str, data_dir: Path, log_file: Path,
) -> None:
    """Write the broker's ``server.properties`` and its log4j2 configuration (WARN and above to a file).

    Args:
        config_file: Where to write ``server.properties``.
        log4j2_file: Where to write the log4j2 configuration.
        bootstrap: ``host:port`` of the client (PLAINTEXT) listener.
        controller: ``host:port`` of the controller listener.
        data_dir: Kafka's ``log.dirs``.
        log_file: The file log4j2 appends the broker's log to.

    Examples:
        >>> write_config(  # doctest: +SKIP
        ...     Path("/tmp/k/server.properties"), Path("/tmp/k/log4j2.properties"),
        ...     bootstrap="127.0.0.1:19092", controller="127.0.0.1:19093",
        ...     data_dir=Path("/tmp/k/data"), log_file=Path("/tmp/k/logs/broker.log"))

    """
    settings = server_properties(bootstrap, controller, data_dir)
    config_file.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    log4j2_file.write_text(_LOG4J2.format(log_file=log_file))


def format_storage(java: str, classpath: str, config_file: Path, data_dir: Path) -> None:
    """Format the KRaft storage in ``data_dir`` unless it already is (a restarted broker keeps its topics).

    The storage tool runs in ``config_file``'s folder with a fresh cluster id.

    Args:
        java: The Java launcher.
        classpath: The broker's classpath.
        config_file: The broker's ``server.properties``.
        data_dir: Its ``log.dirs``; formatted when it holds no ``meta.properties``.

    Raises:
        KafkaBrokerError: The storage tool failed (the message quotes the end of its output).

    Examples:
        >>> format_storage(java, classpath, state / "server.properties", state / "data")  # doctest: +SKIP

    """
    if (data_dir / "meta.properties").exists():
        return
    proc = subprocess.run(
        [java, *_TOOL_JVM, "-cp", classpath, "kafka.tools.StorageTool", "format",
         "--cluster-id", cluster_id(), "--config", str(config_file)],
        capture_output=True, text=True, check=False, timeout=120, cwd=config_file.parent,
    )
    if proc.returncode != 0:
        raise KafkaBrokerError(
            f"formatting the KRaft storage failed: {log_summary(proc.stdout + proc.stderr)}",
            location=str(data_dir),
        )


def cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding, not starting with '-'.

    Examples:
        >>> len(cluster_id())
        22

    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text
