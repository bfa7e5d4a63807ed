"""Stage 3, gold: per sensor and 10-minute window, how many readings and their temperature range.

Exact and fresh within one trigger: each batch of new readings recomputes only the windows it touches,
from every reading of those windows, so a late reading updates its window.
"""

from pyspark.sql import functions as F

import deltaflow as dp


@dp.materialized_view(
    comment="Readings and temperature (min, max, avg) per sensor and 10-minute window",
    refresh=dp.by_window("ts", "10 minutes"),
)
def sensor_stats_10min():
    return (
        spark.read.table("sensor_readings")
        .groupBy(F.window("ts", "10 minutes"), "sensor_id")
        .agg(
            F.count("*").alias("readings"),
            F.min("temperature_c").alias("min_temperature_c"),
            F.max("temperature_c").alias("max_temperature_c"),
            F.avg("temperature_c").alias("avg_temperature_c"),
        )
    )
