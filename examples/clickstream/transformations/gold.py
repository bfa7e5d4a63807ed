"""Gold: hourly product metrics (seed 000, "The Gold Layer"), exact and fresh within one trigger.

The seed's streaming ``countDistinct`` is not supported by Spark. Here the same query is a materialized
view refreshed by window, and incremental (``deltaflow graph`` says so): its totals live in Spark's state
store, each batch of new silver rows folded into the hours it touches, its never-seen (hour, product, user)
triples raising ``unique_users``, so the count is exact and late events update their hour. The state keeps
an hour until ten minutes (in event time) after it ends; a click later than that has its hour recomputed
from silver, so the state stays bounded and the figures exact.
"""

from pyspark.sql import functions as F

import deltaflow as dp


@dp.materialized_view(
    comment="Views, unique users and revenue per product and hour",
    refresh=dp.by_window("event_timestamp", "1 hour", lateness="10 minutes"),
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
