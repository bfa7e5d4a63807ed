"""The tutorial's pipeline over Kafka: topic `events` -> bronze (raw records) -> silver -> gold."""

from pyspark.sql import functions as F

import deltaflow as dp

EVENT_SCHEMA = "event_id STRING, user_id STRING, action STRING, amount DOUBLE, ts TIMESTAMP"


@dp.table(comment="Every record of topic events, as received, with its partition and offset")
def bronze_events():
    return dp.read_kafka("events")


# A record that is not JSON of this schema, and an event without a user, go to silver_events_quarantine.
@dp.expect_or_quarantine("has_user", "user_id IS NOT NULL")
@dp.table(comment="Events with a user, each event once")
def silver_events():
    return (
        dp.parse_json(spark.readStream.table("bronze_events"), EVENT_SCHEMA)
        .withWatermark("ts", "1 day")
        .dropDuplicatesWithinWatermark(["event_id"])
    )


@dp.materialized_view(comment="Events and amount per action")
def gold_actions():
    return (
        spark.read.table("silver_events")
        .groupBy("action")
        .agg(F.count("*").alias("events"), F.round(F.sum("amount"), 2).alias("amount"))
    )
