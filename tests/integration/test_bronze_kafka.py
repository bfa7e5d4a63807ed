"""Kafka -> bronze: raw bytes kept, restarts append nothing twice, unreachable brokers fail fast."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer
from deltalake import DeltaTable

from helpers import cli, free_port

BRONZE = """
import deltaflow as dp

@dp.table
def bronze():
    return dp.read_kafka("{topic}")
"""


def produce_raw(bootstrap: str, topic: str, values: list[bytes | None]) -> None:
    from deltaflow.dev.topics import create_topic

    create_topic(bootstrap, topic, partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i, value in enumerate(values):
        producer.produce(topic, key=f"k{i}".encode(), value=value)
    assert producer.flush(30) == 0


def test_garbage_and_non_utf8_values_land_byte_for_byte(spark, kafka_bootstrap, make_project) -> None:
    topic = f"raw-{uuid.uuid4().hex[:8]}"
    values: list[bytes | None] = [
        b'{"event_id": "1", "user_id": "u1"}',   # good JSON
        b'{"event_id": "2", "user_id": ',        # truncated JSON
        b"\xff\xfe\x00\x01 binary garbage \x80",  # not UTF-8
        "caf\u00e9 \u2603 \U0001f600".encode(),  # valid multi-byte UTF-8
        b"",                                     # empty
        None,                                    # tombstone
        b"\xc3\x28 invalid continuation",       # invalid 2-byte sequence
        bytes(range(256)),                       # every byte value
    ]
    produce_raw(kafka_bootstrap, topic, values)
    project = make_project(BRONZE.format(topic=topic), bootstrap=kafka_bootstrap)
    [outcome] = project.run(spark)
    assert outcome.state == "completed"

    rows = {r["offset"]: r for r in spark.read.format("delta").load(project.table("bronze")).collect()}
    assert sorted(rows) == list(range(len(values)))
    for offset, original in enumerate(values):
        row = rows[offset]
        restored = row["value_bytes"] if row["value_bytes"] is not None else (
            None if row["value"] is None else row["value"].encode("utf-8"))
        assert restored == original, f"offset {offset}"
        assert row["topic"] == topic and row["partition"] == 0 and row["timestamp"] is not None

    # An independent Delta reader reads every row, including the non-UTF-8 ones.
    table = DeltaTable(project.table("bronze")).to_pyarrow_table()
    by_offset = dict(zip(table["offset"].to_pylist(), table["value_bytes"].to_pylist(), strict=True))
    assert by_offset[2] == values[2] and by_offset[7] == values[7] and by_offset[0] is None


def test_restart_after_clean_stop_appends_nothing(spark, kafka_bootstrap, make_project) -> None:
    from deltaflow.dev.generator import produce

    topic = f"restart-{uuid.uuid4().hex[:8]}"
    from deltaflow.dev.topics import create_topic

    create_topic(kafka_bootstrap, topic, partitions=3)
    produce(kafka_bootstrap, topic, [{"event_id": str(i)} for i in range(500)])
    project = make_project(BRONZE.format(topic=topic), bootstrap=kafka_bootstrap)
    project.run(spark)
    first = DeltaTable(project.table("bronze"))
    assert first.to_pyarrow_table().num_rows == 500
    version = first.version()

    assert project.pipeline(spark).reason_to_start() is None  # the offsets are compared without Spark
    project.run(spark)  # nothing new in Kafka: no batch, no commit
    again = DeltaTable(project.table("bronze"))
    assert again.version() == version
    assert again.to_pyarrow_table().num_rows == 500

    produce(kafka_bootstrap, topic, [{"event_id": str(i)} for i in range(500, 600)])
    news = project.pipeline(spark).new_input()
    assert (news.reason, news.kafka_records) == ("flow 'bronze': 100 new Kafka record(s)", 100)
    project.run(spark)
    table = DeltaTable(project.table("bronze")).to_pyarrow_table()
    pairs = set(zip(table["partition"].to_pylist(), table["offset"].to_pylist(), strict=True))
    assert table.num_rows == 600 == len(pairs)


def test_unreachable_broker_is_one_line_naming_the_address(spark, tmp_path, make_project, capsys) -> None:  # type: ignore[no-untyped-def]
    address = f"127.0.0.1:{free_port()}"
    project = make_project(BRONZE.format(topic="t"), bootstrap=address)
    proc = cli(capsys, "run", "--available-now", "--spec", str(project.spec_path))
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert address in errors[0] and "unreachable" in errors[0]
    assert "Traceback" not in proc.stderr
