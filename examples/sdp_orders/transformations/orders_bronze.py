"""Bronze and silver, with Spark Declarative Pipelines' Python API (``pyspark.pipelines``)."""

from pyspark import pipelines as dp
from pyspark.sql import DataFrame

ORDER_SCHEMA = (
    "order_id STRING, customer_id STRING, product_category STRING, amount DOUBLE, order_timestamp TIMESTAMP"
)


@dp.table(comment="Raw orders, as they land: one JSON object per line")
def orders_bronze() -> DataFrame:
    return spark.readStream.format("json").schema(ORDER_SCHEMA).load(spark.conf.get("orders.landing"))


@dp.materialized_view(comment="Orders with an id and a positive amount, each order once")
def orders_silver() -> DataFrame:
    return (
        spark.read.table("orders_bronze")
        .where("order_id IS NOT NULL AND amount > 0")
        .dropDuplicates(["order_id"])
    )
