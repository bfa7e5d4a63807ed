"""Silver: parsed, cleaned, deduplicated clickstream events (seed 000, "The Silver Layer")."""

from pyspark.sql import functions as F

import deltaflow as dp

CLICK_SCHEMA = (
    "event_id STRING, user_id STRING, product_id STRING, event_type STRING, event_timestamp TIMESTAMP, "
    "revenue DOUBLE, session_id STRING, page STRING, user_agent STRING"
)


@dp.table(comment="Clickstream events with a type and a user, each event once")
def silver_clicks():
    return (
        spark.readStream.table("bronze_clicks")
        .select(F.from_json("value", CLICK_SCHEMA).alias("e"), "topic", "partition", "offset")
        .select("e.*", "topic", "partition", "offset")
        .where(F.col("event_type").isNotNull() & F.col("user_id").isNotNull())
        # A producer retry can deliver an event twice; the watermark bounds the state kept to find them.
        .withWatermark("event_timestamp", "10 minutes")
        .dropDuplicatesWithinWatermark(["event_id"])
        .withColumn("event_date", F.to_date("event_timestamp"))
        .withColumn("processed_at", F.current_timestamp())
    )
