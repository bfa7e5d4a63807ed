"""Stage 1, the raw landing zone (seed 004): every Kafka record as it arrived, nothing parsed.

The seed's columns: topic, partition, offset, kafka_ts, raw_payload, arrived_at; plus raw_bytes, the
original bytes of a payload that is not UTF-8 (null otherwise), so that nothing that arrived is lost.
``merge_schema`` makes this the seed's flexible raw zone: a column added here later is taken by the table.
"""

from pyspark.sql import functions as F

import deltaflow as dp


@dp.table(comment="Sensor records exactly as they arrived from Kafka", merge_schema=True)
def raw_sensor_readings():
    return dp.read_kafka(dp.parameter("topic")).select(
        "topic", "partition", "offset",
        F.col("timestamp").alias("kafka_ts"),
        F.col("value").alias("raw_payload"),
        F.col("value_bytes").alias("raw_bytes"),
        F.col("ingested_at").alias("arrived_at"),
    )
