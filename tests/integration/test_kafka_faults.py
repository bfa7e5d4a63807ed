"""Kafka faults over the real broker: partitions added mid-stream, a topic deleted and recreated, and the
broker restarted under a continuous run. Nothing lost, nothing twice, or one line saying what happened."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from helpers import Project, free_port

BRONZE = """
import deltaflow as dp

@dp.table
def bronze():
    return dp.read_kafka("{topic}"{options})
"""


def events(prefix: str, count: int) -> list[dict[str, Any]]:
    return [{"id": f"{prefix}{i}"} for i in range(count)]


def landed(project: Project) -> list[str]:
    import json

    return sorted(json.loads(r["value"])["id"] for r in project.rows("bronze"))


def test_partitions_added_mid_stream_are_read_from_their_start(  # type: ignore[no-untyped-def]
        spark, kafka_bootstrap: str, make_project) -> None:
    from confluent_kafka.admin import NewPartitions

    from deltaflow.dev.generator import produce
    from deltaflow.dev.topics import admin_client, create_topic

    topic = f"grow-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, partitions=1)
    project = make_project(BRONZE.format(topic=topic, options=""), bootstrap=kafka_bootstrap)
    produce(kafka_bootstrap, topic, events("a", 30))
    assert {o.state for o in project.run(spark)} == {"completed"}
    admin = admin_client(kafka_bootstrap)
    for future in admin.create_partitions([NewPartitions(topic, 3)]).values():
        future.result(30)
    produce(kafka_bootstrap, topic, events("b", 60), key_fn=lambda e: e["id"].encode())  # over 3 partitions
    assert {o.state for o in project.run(spark)} == {"completed"}
    assert landed(project) == sorted(e["id"] for e in events("a", 30) + events("b", 60))
    assert {r["partition"] for r in project.rows("bronze")} == {0, 1, 2}


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_topic_deleted_and_recreated_stops_the_flow_naming_it_unless_told_to_go_on(  # type: ignore[no-untyped-def]
        spark, kafka_bootstrap: str, make_project, fail_on_data_loss: bool) -> None:
    from deltaflow.dev.generator import produce
    from deltaflow.dev.topics import admin_client, create_topic
    from deltaflow.errors import FlowError

    topic = f"again-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, partitions=1)
    options = "" if fail_on_data_loss else ", fail_on_data_loss=False"
    project = make_project(BRONZE.format(topic=topic, options=options), bootstrap=kafka_bootstrap)
    produce(kafka_bootstrap, topic, events("a", 40))
    project.run(spark)
    admin = admin_client(kafka_bootstrap)
    for future in admin.delete_topics([topic]).values():
        future.result(30)
    deadline = time.monotonic() + 60
    while True:  # the broker deletes a topic in the background: create it once it is gone
        try:
            create_topic(kafka_bootstrap, topic, partitions=1)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    produce(kafka_bootstrap, topic, events("b", 10))  # offsets 0..9, behind the checkpoint's 40
    if fail_on_data_loss:
        with pytest.raises(FlowError) as stopped:
            project.pipeline(spark).run("available_now")
        message = str(stopped.value)
        assert topic in message and "from 40 to 10" in message, message
        assert "fail_on_data_loss=False" in message
        assert "\n" not in message.strip()
        assert landed(project) == sorted(e["id"] for e in events("a", 40))  # nothing written meanwhile
    else:
        assert {o.state for o in project.run(spark)} == {"completed"}
        produce(kafka_bootstrap, topic, events("c", 50))  # offsets 10..59: those past 40 are read
        assert {o.state for o in project.run(spark)} == {"completed"}
        got = landed(project)
        assert len(got) == len(set(got)) and {e["id"] for e in events("a", 40)} <= set(got)


def test_a_broker_restarted_under_a_continuous_run_loses_and_repeats_nothing(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, make_project) -> None:
    from deltaflow.dev.broker import EmbeddedKafka
    from deltaflow.dev.generator import produce
    from deltaflow.dev.topics import create_topic

    broker = EmbeddedKafka(state_dir=tmp_path / "kafka", port=free_port())
    bootstrap = broker.start()
    try:
        topic = f"restart-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, partitions=2)
        project = make_project(BRONZE.format(topic=topic, options=""), bootstrap=bootstrap)
        produce(bootstrap, topic, events("a", 50))
        run = project.pipeline(spark).start("continuous", "1 second")
        stop = threading.Event()
        outcomes: list[Any] = []
        watcher = threading.Thread(target=lambda: outcomes.extend(run.wait(stop)), daemon=True)
        watcher.start()

        def wait_for_rows(count: int, timeout: float = 120) -> None:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    if len(project.rows("bronze")) >= count:
                        return
                except Exception:  # the table's first commit is not there yet
                    pass
                time.sleep(0.5)
            raise AssertionError(f"bronze did not reach {count} rows")

        wait_for_rows(50)
        broker.stop()
        broker.start()  # same port, same data
        produce(bootstrap, topic, events("b", 70))
        wait_for_rows(120)
        stop.set()
        watcher.join(180)
        assert [o.state for o in outcomes] == ["stopped"], outcomes
        assert landed(project) == sorted(e["id"] for e in events("a", 50) + events("b", 70))
    finally:
        broker.stop()
