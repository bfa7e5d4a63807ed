"""Small Kafka admin helpers: make sure a topic exists.

Every client made here is silenced (``log_level`` 0): librdkafka would otherwise print a line to stderr
for each failed connection attempt, and the user should see only deltaflow's one-line error.

Examples:
    >>> from deltaflow.dev.topics import create_topic
    >>> create_topic("127.0.0.1:19092", "clicks", partitions=3)  # doctest: +SKIP

"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from deltaflow.errors import SourceError

QUIET: dict[str, Any] = {"log_level": 0}
"""librdkafka settings that keep a client from writing its own log lines to stderr."""

_RETRY_PAUSE = 0.2
_RECONNECT_MAX_MS = 500
# Answers of a broker that is not ready yet; with replication factor 1, INVALID_REPLICATION_FACTOR only
# means that no broker has registered with the controller so far.
_NOT_READY = frozenset({
    KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN,
    KafkaError.REQUEST_TIMED_OUT, KafkaError.INVALID_REPLICATION_FACTOR,
})


def admin_client(bootstrap: str, timeout: float = 5) -> AdminClient:
    """A silenced :class:`confluent_kafka.admin.AdminClient` for ``bootstrap``.

    Args:
        bootstrap: ``host:port`` of the broker.
        timeout: Default request timeout in seconds.

    Examples:
        >>> admin = admin_client("127.0.0.1:19092")  # doctest: +SKIP
        >>> sorted(admin.list_topics(timeout=5).topics)  # doctest: +SKIP
        ['__deltaflow_ready', 'clicks']

    """
    return AdminClient({
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": int(timeout * 1000),
        "reconnect.backoff.max.ms": _RECONNECT_MAX_MS,  # notice a broker that just came up quickly
        **QUIET,
    })


def _error_of(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def _describe(exc: BaseException) -> str:
    err = _error_of(exc)
    return err.str() if err is not None else (str(exc) or type(exc).__name__)


def try_create_topic(admin: AdminClient, topic: str, partitions: int = 1, timeout: float = 5) -> bool:
    """One attempt to create ``topic``; True when it was created or already exists.

    Args:
        admin: A client from :func:`admin_client`.
        topic: Topic name.
        partitions: Partition count for a new topic (an existing topic is left as it is).
        timeout: Seconds to wait for the controller's answer.

    Raises:
        KafkaException: The broker refused the topic for another reason than that it already exists.

    Examples:
        >>> try_create_topic(admin_client("127.0.0.1:19092"), "clicks", 3)  # doctest: +SKIP
        True

    """
    future = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        operation_timeout=timeout,
        request_timeout=timeout,
    )[topic]
    try:
        future.result(timeout=timeout + 1)
    except KafkaException as exc:
        err = _error_of(exc)
        if err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return True
        if err is not None and (err.retriable() or err.code() in _NOT_READY):
            return False
        raise
    except TimeoutError:
        return False
    return True


def create_topic(bootstrap: str, topic: str, partitions: int = 1, timeout: float = 30) -> None:
    """Create ``topic`` (replication factor 1) unless it exists, and wait until the broker confirms.

    Args:
        bootstrap: ``host:port`` of the broker.
        topic: Topic name.
        partitions: Partition count for a new topic (an existing topic is left as it is).
        timeout: Seconds to keep trying.

    Raises:
        SourceError: The broker refused the topic or did not answer within ``timeout``.

    Examples:
        >>> create_topic("127.0.0.1:19092", "clicks", partitions=3)  # doctest: +SKIP

    """
    admin = admin_client(bootstrap)
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            if try_create_topic(admin, topic, partitions, timeout=max(0.5, min(left, 5.0))):
                break
        except KafkaException as exc:
            reason = _describe(exc)
            raise SourceError(f"cannot create topic '{topic}': {reason}", location=bootstrap) from None
        time.sleep(min(_RETRY_PAUSE, max(0.0, deadline - time.monotonic())))
    else:
        raise SourceError(
            f"cannot create topic '{topic}': no broker answered within {timeout:g}s", location=bootstrap
        )
    # The controller has created it; the broker serves it once its metadata has caught up (KRaft), and a
    # client asking before then sees the topic without partitions.
    while deadline - time.monotonic() > 0:
        found = admin.list_topics(topic, timeout=5).topics.get(topic)
        if found is not None and found.error is None and found.partitions:
            return
        time.sleep(0.05)
    raise SourceError(f"topic '{topic}' was created but the broker does not serve it after {timeout:g}s",
                      location=bootstrap)
