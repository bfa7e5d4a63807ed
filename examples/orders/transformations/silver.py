"""Silver: valid orders, each order once (seed 000, "SILVER: Cleaned and validated")."""

from pyspark.sql import functions as F

import deltaflow as dp


@dp.table(comment="Orders with an id, a positive amount and a timestamp; each order_id once")
def silver_orders():
    return (
        spark.readStream.table("bronze_orders")
        .where(
            F.col("order_id").isNotNull()
            & (F.col("amount") > 0)
            & F.col("order_timestamp").isNotNull()
            & F.col("_corrupt_record").isNull()  # a line that did not fully parse stays in bronze only
        )
        # The seed's streaming dropDuplicates(["order_id"]) would remember every order id forever: its
        # state grows without bound. With a watermark, an order id is remembered for a day after its
        # order_timestamp, which is how late a resent order can arrive and still be dropped. (Orders
        # arriving more than a day behind the newest one seen are dropped too: a day is the lateness the
        # pipeline accepts.)
        .withWatermark("order_timestamp", "1 day")
        .dropDuplicatesWithinWatermark(["order_id"])
        .withColumn("order_date", F.to_date("order_timestamp"))
        .drop("_corrupt_record")
    )
