"""Gold: daily sales per product category (seed 000, "GOLD: Business aggregations"), exact.

The seed recomputes the whole aggregate in "complete" mode every trigger. Here it is a materialized view
refreshed by window: each batch of new silver orders recomputes only the days it touches, from every
silver order of those days, so late orders update their day and the figures equal a batch recomputation.
"""

from pyspark.sql import functions as F

import deltaflow as dp


@dp.materialized_view(
    comment="Orders, revenue and average order value per product category and day",
    refresh=dp.by_window("order_timestamp", "1 day"),
)
def gold_daily_sales():
    return (
        spark.read.table("silver_orders")
        .groupBy(F.window("order_timestamp", "1 day"), "product_category")
        .agg(
            F.count("order_id").alias("order_count"),
            F.sum("amount").alias("total_revenue"),
            F.avg("amount").alias("avg_order_value"),
        )
    )
