"""Gold: hourly product metrics (seed 000, "The Gold Layer"), exact and fresh within one trigger.

The seed's streaming ``countDistinct`` is not supported by Spark. Here the same query is a materialized
view refreshed by window: each batch of new silver rows recomputes only the hours it touches, from every
silver row of those hours, so ``unique_users`` is exact and late events update their hour.
"""

from pyspark.sql import functions as F

import deltaflow as dp


@dp.materialized_view(
    comment="Views, unique users and revenue per product and hour",
    refresh=dp.by_window("event_timestamp", "1 hour"),
)
def gold_hourly_product_metrics():
    return (
        spark.read.table("silver_clicks")
        .groupBy(F.window("event_timestamp", "1 hour"), "product_id")
        .agg(
            F.count("*").alias("view_count"),
            F.countDistinct("user_id").alias("unique_users"),
            F.sum("revenue").alias("total_revenue"),
        )
    )
