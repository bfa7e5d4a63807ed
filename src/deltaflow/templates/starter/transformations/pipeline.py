"""A starter pipeline: JSON lines dropped into landing/ -> bronze -> silver -> gold.

`deltaflow run --available-now` reads each new file once and brings every table up to date; drop another
file into landing/ and run again. `deltaflow run --continuous` keeps watching the folder.
"""

from pyspark.sql import functions as F

import deltaflow as dp

EVENT_SCHEMA = "event_id STRING, user_id STRING, action STRING, amount DOUBLE, ts TIMESTAMP"


@dp.table(comment="Every line of every file in landing/, as received (a line that does not parse is kept "
          "whole in _corrupt_record)")
def bronze_events():
    return dp.read_files(dp.parameter("landing"), format="json", schema=EVENT_SCHEMA)


# An event without a user goes to silver_events_quarantine, with the rule it failed; each event_id once.
@dp.expect_or_quarantine("has_user", "user_id IS NOT NULL")
@dp.table(comment="Events with a user, each event once")
def silver_events():
    return (
        spark.readStream.table("bronze_events")
        .where(F.col("_corrupt_record").isNull())
        .drop("_corrupt_record")
        .withWatermark("ts", "1 day")  # a resent event is recognised for a day
        .dropDuplicatesWithinWatermark(["event_id"])
    )


@dp.materialized_view(comment="Events and amount per action")
def gold_actions():
    return (
        spark.read.table("silver_events")
        .groupBy("action")
        .agg(F.count("*").alias("events"), F.round(F.sum("amount"), 2).alias("amount"))
    )
