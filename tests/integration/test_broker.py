"""The embedded Kafka broker, the admin helpers and the event generator, against a real broker (no mocks)."""

from __future__ import annotations

import json
import random
import socket
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from deltaflow.dev.broker import READY_TOPIC, EmbeddedKafka
from deltaflow.dev.generator import EventGenerator, clickstream_event, encode_event, produce, user_key
from deltaflow.dev.topics import admin_client, create_topic
from deltaflow.errors import KafkaBrokerError, SourceError
from deltaflow.sources.kafka import check_reachable


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def refuses(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        return sock.connect_ex(("127.0.0.1", port)) != 0


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()  # reaped: the pid names no process any more
    return proc.pid


def topics(bootstrap: str) -> set[str]:
    return set(admin_client(bootstrap).list_topics(timeout=10).topics)


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 30) -> list[dict[str, object]]:
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"test-{topic}-{time.monotonic_ns()}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "log_level": 0,
    })
    consumer.subscribe([topic])
    events: list[dict[str, object]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(events) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            events.append(json.loads(msg.value()))
    finally:
        consumer.close()
    return events


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedKafka]:
    broker = EmbeddedKafka(tmp_path_factory.mktemp("kafka"), port=free_port())
    broker.start()
    yield broker
    broker.stop()


def test_produced_events_come_back(kafka: EmbeddedKafka) -> None:
    status = kafka.status()
    assert status.running and status.pid is not None
    assert status.bootstrap == kafka.bootstrap == f"127.0.0.1:{kafka.port}"

    create_topic(kafka.bootstrap, "clicks", partitions=3)
    create_topic(kafka.bootstrap, "clicks", partitions=3)  # idempotent
    partitions = admin_client(kafka.bootstrap).list_topics("clicks", timeout=10).topics["clicks"].partitions
    assert len(partitions) == 3

    rng, now = random.Random(42), datetime.now(UTC)
    events = [clickstream_event(rng, now) for _ in range(100)]
    assert produce(kafka.bootstrap, "clicks", events, key_fn=user_key) == 100

    back = consume_all(kafka.bootstrap, "clicks", expected=100)
    assert sorted(e["event_id"] for e in back) == sorted(e["event_id"] for e in events)


def test_start_again_reuses_the_running_broker(kafka: EmbeddedKafka) -> None:
    pid = kafka.status().pid
    again = EmbeddedKafka(kafka.state_dir, port=kafka.port)
    assert again.start(timeout=10) == kafka.bootstrap
    assert again.status().pid == pid


def test_port_taken_by_another_process(kafka: EmbeddedKafka, tmp_path: Path) -> None:
    with pytest.raises(KafkaBrokerError) as info:
        EmbeddedKafka(tmp_path, port=kafka.port).start(timeout=10)
    message = str(info.value)
    assert kafka.bootstrap in message and "in use" in message and "\n" not in message
    assert not EmbeddedKafka(tmp_path, port=kafka.port).status().running


def test_generator_paces_and_delivers(kafka: EmbeddedKafka) -> None:
    create_topic(kafka.bootstrap, "generated", partitions=3)
    generator = EventGenerator(kafka.bootstrap, "generated", rate=2000, max_events=1000, seed=7)
    started = time.monotonic()
    generator.start()
    generator.join(timeout=30)
    elapsed = time.monotonic() - started
    assert not generator.is_alive() and generator.daemon
    assert generator.error is None
    assert generator.produced == 1000
    assert 0.4 <= elapsed < 10, f"1000 events at 2000/s took {elapsed:.2f}s"

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "watermarks", "log_level": 0})
    try:
        ends = [consumer.get_watermark_offsets(TopicPartition("generated", p), 10)[1] for p in range(3)]
    finally:
        consumer.close()
    assert sum(ends) == 1000

    size = len(encode_event(clickstream_event(random.Random(1), datetime.now(UTC))))
    assert 150 <= size <= 300


def test_check_reachable_names_the_address(capfd: pytest.CaptureFixture[str]) -> None:
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(SourceError) as info:
        check_reachable(address, timeout=2)
    assert time.monotonic() - started < 10
    message = str(info.value)
    assert address in message and "\n" not in message
    assert capfd.readouterr().err == ""  # librdkafka's own connection errors are silenced


def test_lifecycle_stale_pid_restart_and_stop(tmp_path: Path) -> None:
    port = free_port()
    broker = EmbeddedKafka(tmp_path, port=port)

    broker.pid_file.write_text(json.dumps({"pid": dead_pid(), "port": port, "bootstrap": broker.bootstrap}))
    assert not broker.status().running
    assert not broker.pid_file.exists()
    broker.pid_file.write_text(json.dumps({"pid": 1, "port": port, "bootstrap": broker.bootstrap}))
    assert not broker.status().running  # pid reused by a process that is not our broker

    broker.pid_file.write_text(json.dumps({"pid": dead_pid(), "port": port, "bootstrap": broker.bootstrap}))
    assert broker.start() == f"127.0.0.1:{port}"
    record = json.loads(broker.pid_file.read_text())
    assert record["pid"] == broker.status().pid and record["bootstrap"] == broker.bootstrap
    create_topic(broker.bootstrap, "kept")

    assert broker.stop() is True
    assert refuses(port)
    status = broker.status()
    assert not status.running and status.pid is None and not broker.pid_file.exists()
    assert broker.stop() is False

    with EmbeddedKafka(tmp_path, port=port) as restarted:  # storage is not formatted again
        assert {"kept", READY_TOPIC} <= topics(restarted.bootstrap)
    assert refuses(port)


def test_broker_exiting_during_startup_is_reported(tmp_path: Path) -> None:
    broker = EmbeddedKafka(tmp_path, port=free_port())
    broker.data_dir.mkdir(parents=True)
    (broker.data_dir / "meta.properties").write_text("version=1\ncluster.id=broken\nnode.id=99\n")
    started = time.monotonic()
    with pytest.raises(KafkaBrokerError) as info:
        broker.start(timeout=60)
    assert time.monotonic() - started < 30  # noticed the exit, did not wait for the timeout
    message = str(info.value)
    assert "exited during startup" in message and str(broker.log_file) in message and "\n" not in message
    assert not broker.status().running and not broker.pid_file.exists()
